"""Publishing an image as an object: the image first, then the marker that makes it exist.

The image goes up in one PUT (or a multipart upload, visible only once completed); the
artifact exists only once its marker is stored after it, and a marker that cannot be
stored removes the image again. A process killed between the two leaves an object no
marker names, which :mod:`.leftovers` removes after the grace. Each artifact has its own
key (``images/<id>/<name>``), so a requested ``filename`` never collides and
``collision`` never applies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from imagebridge.artifacts.publication import Publication, plan_publication
from imagebridge.artifacts.records import StoredArtifact
from imagebridge.artifacts.s3.markers import image_key, put_with_marker
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["publish_object"]


async def publish_object(
    objects: S3ObjectStore,
    publication: Publication,
    limits: ImageLimits,
    clock: Callable[[], float],
) -> StoredArtifact:
    """Verify the image (in a worker thread) and store it with its marker."""
    plan = await asyncio.to_thread(plan_publication, publication, limits)
    name = plan.name()
    await put_with_marker(
        objects,
        image_key(plan.artifact_id, name),
        publication.data,
        content_type=plan.info.format.media_type,
        step="s3.image_uploaded",
        marker=plan.marker(name, publication.owner, int(clock())),
    )
    return StoredArtifact(plan.artifact_id, name, plan.info)
