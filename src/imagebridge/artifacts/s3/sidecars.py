"""A metadata sidecar in the bucket: ``metadata/<id>.json``, recorded in the marker.

Attached at most once, to a verified artifact whose marker names exactly the given name.
The sidecar object goes up first, then the marker naming it: a crash between the two
leaves an object no marker names (removed by :mod:`.leftovers` after the grace), never a
marker naming a sidecar that was never written. The encoding and its bounds are
:func:`imagebridge.artifacts.rules.encode_sidecar`, the same for both backends.
"""

from __future__ import annotations

import hashlib

from imagebridge.artifacts.rules import sidecar_name
from imagebridge.artifacts.s3.markers import load_marker, put_with_marker, sidecar_key
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.reads import read_image
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["attach_sidecar"]


async def attach_sidecar(
    objects: S3ObjectStore, canonical: str, name: str, encoded: bytes, limits: ImageLimits
) -> str:
    """Store the encoded sidecar of the artifact ``canonical`` named ``name`` and record it
    in its marker; returns the sidecar's portable name."""
    marker = await load_marker(objects, canonical)
    if (
        marker is None
        or marker.name != name
        or marker.sidecar_name is not None
        or await read_image(objects, marker, limits) is None
    ):
        raise BridgeError.artifact("artifact metadata cannot be attached to this artifact")
    named = sidecar_name(name, canonical)
    await put_with_marker(
        objects,
        sidecar_key(canonical),
        encoded,
        content_type="application/json",
        step="s3.sidecar_uploaded",
        marker=marker.with_sidecar(named, hashlib.sha256(encoded).hexdigest()),
    )
    return named
