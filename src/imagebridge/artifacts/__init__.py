"""Artifacts: where generated images are kept (a directory tree or an S3 bucket), and the
loading of caller inputs.

Shaped like :mod:`imagebridge.storage`: the vocabulary both backends share sits on top,
the backends are twins below it with the same file names for the same jobs, and neither
twin imports the other (an import-linter contract checks it).

- :mod:`.interfaces` — :class:`~.interfaces.ArtifactBackend`, what async code asks of a
  backend; :mod:`.records` — what every backend returns; :mod:`.publication` — the one
  :class:`~.publication.Publication` value ``publish`` takes, its checks and its naming;
  :mod:`.rules` — the errors, sidecar encoding, thumbnail and retention checks both
  backends apply alike; :mod:`.markers` — the ownership record's format; :mod:`.naming`
  — portable names.
- :mod:`.filesystem` — the store below ``artifacts.root`` (the default backend; its
  ``AsyncArtifactStore`` runs each call in a worker thread), and the bridge's own signed
  links, keyed in that root.
- :mod:`.s3` — the store in an S3-compatible bucket and its object layer (the ``s3``
  extra, imported when a bucket is first used), and presigned links.
- :mod:`.inputs` — the engine's input port: local files confined to the configured
  roots, inline base64 and data URLs, remote URLs with their SSRF rules.

``application/artifact_backend.py`` chooses the backend from ``artifacts.backend``. Every
failure is a :class:`~imagebridge.contract.errors.BridgeError`.
"""

from imagebridge.artifacts.interfaces import ArtifactBackend
from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.records import (
    ArtifactContent,
    CleanupReport,
    RepairReport,
    StoredArtifact,
)

__all__ = [
    "ArtifactBackend",
    "ArtifactContent",
    "CleanupReport",
    "Publication",
    "RepairReport",
    "StoredArtifact",
]
