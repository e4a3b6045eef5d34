"""The S3 artifact backend: images in an S3-compatible bucket, one marker object each.

:mod:`.store` holds :class:`~.store.S3ArtifactStore` (an
:class:`~imagebridge.artifacts.interfaces.ArtifactBackend`) over the object layer of
:mod:`.objects` (aiobotocore, the ``s3`` extra, imported when a bucket is first used); the
other modules are its jobs, named like the filesystem twin's
(:mod:`imagebridge.artifacts.filesystem`), which this package never imports.
"""
