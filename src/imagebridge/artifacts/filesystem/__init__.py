"""The filesystem artifact backend: images below ``artifacts.root``, one marker each.

:mod:`.store` holds :class:`~.store.ArtifactStore` (synchronous) and
:class:`~.store.AsyncArtifactStore` (the same store for async code, the
:class:`~imagebridge.artifacts.interfaces.ArtifactBackend`); the other modules are its
jobs, named like the S3 twin's (:mod:`imagebridge.artifacts.s3`), which this package never
imports.
"""
