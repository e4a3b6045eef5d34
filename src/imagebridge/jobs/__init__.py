"""Durable jobs and presets: the services behind ``/v1/jobs`` and ``/v1/presets``.

:class:`JobManager` persists image requests, runs them through the runtime with bounded
concurrency and keeps their history; :class:`PresetService` stores named request templates.
Both sit on the storage protocols (:mod:`imagebridge.storage`) and speak contract models.
Session bindings need no glue here: providers use
:class:`imagebridge.storage.SqliteSessionStore` directly.
"""

from imagebridge.jobs.manager import JobManager, progress_stage
from imagebridge.jobs.presets import PresetService, template_request, validate_template
from imagebridge.jobs.previews import PartialPreview
from imagebridge.jobs.query import JobQuery, job_query
from imagebridge.jobs.services import JobServices
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.jobs.trimming import TRIMMED_WARNING

__all__ = [
    "TRIMMED_WARNING",
    "JobManager",
    "JobManagerSettings",
    "JobQuery",
    "JobServices",
    "PartialPreview",
    "PresetService",
    "job_query",
    "progress_stage",
    "template_request",
    "validate_template",
]
