"""Durable jobs and presets: the services behind ``/v1/jobs`` and ``/v1/presets``.

:class:`JobManager` persists image requests, runs them through the runtime with bounded
concurrency and keeps their history; :class:`PresetService` stores named request templates.
Both sit on the storage protocols (:mod:`imagebridge.storage`) and speak contract models.
Session bindings need no glue here: providers open them with
:func:`imagebridge.storage.open_session_store`. Several bridge instances may share one
PostgreSQL database (shared mode, :mod:`imagebridge.jobs.shared_mode`).
"""

from imagebridge.jobs.manager import JobManager
from imagebridge.jobs.presets import PresetService, template_request, validate_template
from imagebridge.jobs.previews import PartialPreview
from imagebridge.jobs.progress import progress_stage
from imagebridge.jobs.query import JobQuery, job_query
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.jobs.shared_mode import SharedQueueSettings, default_instance_id
from imagebridge.jobs.trimming import TRIMMED_WARNING

__all__ = [
    "TRIMMED_WARNING",
    "JobManager",
    "JobManagerSettings",
    "JobQuery",
    "PartialPreview",
    "PresetService",
    "SharedQueueSettings",
    "default_instance_id",
    "job_query",
    "progress_stage",
    "template_request",
    "validate_template",
]
