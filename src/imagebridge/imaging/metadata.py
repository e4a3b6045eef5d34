"""Generation records embedded as XMP in PNG, JPEG and WebP, without touching pixels.

The record is a JSON object (1 B … 40 KiB) carried base64-encoded inside a small XMP
packet. Each container is edited at the chunk/segment level only:

* PNG: every existing XMP ``iTXt`` chunk is dropped and one uncompressed ``iTXt``
  is written right before ``IEND`` (anything after ``IEND`` is dropped).
* JPEG: existing XMP ``APP1`` segments are dropped (the original stacked them) and
  one new ``APP1`` follows ``SOI``.
* WebP: a simple file becomes an extended one (``VP8X`` with the right flags),
  existing ``XMP `` chunks are dropped and one is appended; the RIFF size is fixed.

Source and result are both fully inspected; format and dimensions must not change.
Errors are ``BridgeError(code=artifact)``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = [
    "MAX_EMBEDDED_METADATA_BYTES",
    "MAX_WEBP_CHUNKS",
    "MAX_XMP_PACKET_BYTES",
    "RECORD_TRIM_ORDER",
    "aembed_metadata",
    "aextract_metadata",
    "build_generation_record",
    "embed_metadata",
    "encode_json_object",
    "extract_metadata",
    "extract_metadata_record",
    "fit_generation_record",
    "has_c2pa_manifest",
    "iter_webp_chunks",
    "xmp_packet",
]

MAX_EMBEDDED_METADATA_BYTES = 40 * 1024
MAX_XMP_PACKET_BYTES = 56 * 1024
MAX_WEBP_CHUNKS = 4_096
_MAX_PNG_CHUNKS = 100_000
_MAX_JPEG_SEGMENTS = 4_096
#: Optional record fields dropped, in this order, until the record fits.
RECORD_TRIM_ORDER = ("usage", "session", "normalizations", "warnings", "revised_prompt")

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_XMP_KEYWORD = b"XML:com.adobe.xmp"
_JPEG_XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"
_XMP_OPEN = b"<igb:Metadata>"
_XMP_CLOSE = b"</igb:Metadata>"
_XMP_PREFIX = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="imagegen-bridge">'
    b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
    b'<rdf:Description rdf:about="" '
    b'xmlns:igb="https://github.com/Crimsab/imagegen-bridge/ns/1.0/">' + _XMP_OPEN
)
_XMP_SUFFIX = _XMP_CLOSE + b"</rdf:Description></rdf:RDF></x:xmpmeta>"


def _metadata_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.ARTIFACT, message, details=details or None)


def _verification_error(error: BridgeError) -> BridgeError:
    return BridgeError(
        ErrorCode.ARTIFACT,
        "image failed verification while embedding metadata",
        details={**error.details, "reason": error.message},
    )


# -- JSON record validation ----------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _parse_object(encoded: bytes, limit: int) -> dict[str, Any] | None:
    if not encoded or len(encoded) > limit:
        return None
    try:
        value = json.loads(encoded.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _compact_json(record: Mapping[str, Any], what: str) -> bytes:
    try:
        return json.dumps(
            dict(record), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise _metadata_error(f"{what} must be a JSON object") from exc


def encode_json_object(record: Mapping[str, Any] | bytes, *, limit: int, what: str) -> bytes:
    """Compact UTF-8 JSON for ``record`` after proving it is an object within ``limit``."""
    encoded = (
        bytes(record) if isinstance(record, bytes | bytearray) else _compact_json(record, what)
    )
    if _parse_object(encoded, limit) is None:
        raise _metadata_error(
            f"{what} must be a JSON object no larger than {limit // 1024} KiB",
            maximum_bytes=limit,
        )
    return encoded


def xmp_packet(record_json: bytes) -> bytes:
    """The XMP packet carrying ``record_json`` (base64 inside ``igb:Metadata``)."""
    return _XMP_PREFIX + base64.b64encode(record_json) + _XMP_SUFFIX


# -- PNG ----------------------------------------------------------------------------------------


def _png_chunks(data: bytes) -> Iterator[tuple[bytes, int, int]]:
    """(type, start, end) of each chunk up to and including IEND."""
    if not data.startswith(_PNG_SIGNATURE):
        raise _metadata_error("PNG container is malformed")
    position = len(_PNG_SIGNATURE)
    for _ in range(_MAX_PNG_CHUNKS):
        if position + 12 > len(data):
            raise _metadata_error("PNG chunk is truncated")
        (length,) = struct.unpack(">I", data[position : position + 4])
        end = position + 12 + length
        if end > len(data):
            raise _metadata_error("PNG chunk data is truncated")
        kind = data[position + 4 : position + 8]
        yield kind, position, end
        if kind == b"IEND":
            return
        position = end
    raise _metadata_error("PNG chunk count exceeds the limit")


def _is_png_xmp(data: bytes, start: int, end: int) -> bool:
    body = data[start + 8 : end - 4]
    return body.startswith(_PNG_XMP_KEYWORD + b"\x00")


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _embed_png(data: bytes, packet: bytes) -> bytes:
    parts = [_PNG_SIGNATURE]
    for kind, start, end in _png_chunks(data):
        if kind == b"IEND":
            # keyword, NUL, compression flag 0, method 0, empty language, empty translation
            body = _PNG_XMP_KEYWORD + b"\x00\x00\x00\x00\x00" + packet
            parts.append(_png_chunk(b"iTXt", body))
            parts.append(data[start:end])
            return b"".join(parts)
        if kind == b"iTXt" and _is_png_xmp(data, start, end):
            continue
        parts.append(data[start:end])
    raise _metadata_error("PNG container has no valid IEND chunk")  # pragma: no cover


def has_c2pa_manifest(data: bytes, image_format: OutputFormat) -> bool:
    """Whether the image carries a C2PA manifest (content credentials).

    Codex PNGs do (a ``caBX`` chunk). Its signature covers the image's bytes, so
    embedding XMP invalidates it: the caller should know before asking for that. JPEG
    carries it in ``APP11`` JUMBF boxes, WebP in a ``C2PA`` chunk. A container that
    cannot be walked counts as carrying none.
    """
    try:
        if image_format is OutputFormat.PNG:
            return any(kind == b"caBX" for kind, _, _ in _png_chunks(data))
        if image_format is OutputFormat.JPEG:
            return any(
                marker == 0xEB and b"jumb" in _jpeg_payload(data, start, end)[:64]
                for marker, start, end in _jpeg_segments(data)
            )
        return any(kind == b"C2PA" for kind, _ in iter_webp_chunks(data))
    except BridgeError:
        return False


def _extract_png(data: bytes) -> bytes | None:
    for kind, start, end in _png_chunks(data):
        if kind == b"iTXt" and _is_png_xmp(data, start, end):
            body = data[start + 8 : end - 4]
            cursor = len(_PNG_XMP_KEYWORD) + 1
            if body[cursor : cursor + 2] != b"\x00\x00":
                raise _metadata_error("PNG XMP chunk is malformed")
            cursor += 2
            for _ in range(2):  # language tag, translated keyword
                nul = body.find(b"\x00", cursor)
                if nul < 0:
                    raise _metadata_error("PNG XMP text field is malformed")
                cursor = nul + 1
            return _bounded_packet(body[cursor:])
    return None


# -- JPEG ---------------------------------------------------------------------------------------


def _jpeg_segments(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(marker, start, end) of each segment after SOI; the last one runs to the end of data.

    The entropy-coded data starting at SOS (or an EOI) is yielded as one final span.
    """
    if not data.startswith(b"\xff\xd8"):
        raise _metadata_error("JPEG container is malformed")
    position = 2
    for _ in range(_MAX_JPEG_SEGMENTS):
        if position >= len(data):
            return
        start = position
        if data[position] != 0xFF:
            raise _metadata_error("JPEG marker stream is malformed")
        while position < len(data) and data[position] == 0xFF:
            position += 1
        if position >= len(data):
            raise _metadata_error("JPEG marker stream is truncated")
        marker = data[position]
        position += 1
        if marker in (0xDA, 0xD9):
            yield marker, start, len(data)
            return
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            yield marker, start, position
            continue
        if position + 2 > len(data):
            raise _metadata_error("JPEG segment is truncated")
        (length,) = struct.unpack(">H", data[position : position + 2])
        if length < 2 or position + length > len(data):
            raise _metadata_error("JPEG segment length is malformed")
        position += length
        yield marker, start, position
    raise _metadata_error("JPEG segment count exceeds the limit")


def _jpeg_payload(data: bytes, start: int, end: int) -> bytes:
    """Segment body after the marker and length bytes."""
    position = start
    while data[position] == 0xFF:
        position += 1
    return data[position + 3 : end]


def _is_jpeg_xmp(marker: int, data: bytes, start: int, end: int) -> bool:
    return marker == 0xE1 and _jpeg_payload(data, start, end).startswith(_JPEG_XMP_HEADER)


def _embed_jpeg(data: bytes, packet: bytes) -> bytes:
    body = _JPEG_XMP_HEADER + packet
    if len(body) + 2 > 0xFFFF:
        raise _metadata_error("JPEG XMP record exceeds the APP1 limit")
    parts = [b"\xff\xd8", b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body]
    for marker, start, end in _jpeg_segments(data):
        if _is_jpeg_xmp(marker, data, start, end):
            continue
        parts.append(data[start:end])
    return b"".join(parts)


def _extract_jpeg(data: bytes) -> bytes | None:
    for marker, start, end in _jpeg_segments(data):
        if marker in (0xDA, 0xD9):
            return None
        if _is_jpeg_xmp(marker, data, start, end):
            return _bounded_packet(_jpeg_payload(data, start, end)[len(_JPEG_XMP_HEADER) :])
    return None


# -- WebP ---------------------------------------------------------------------------------------


def iter_webp_chunks(
    data: bytes, *, max_chunks: int = MAX_WEBP_CHUNKS
) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(fourcc, payload)`` for each RIFF chunk, lazily and within ``max_chunks``.

    The RIFF size must equal the file length. Stopping iteration early never reads
    (or judges) the bytes after the last chunk consumed.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise _metadata_error("WebP container is malformed")
    (advertised,) = struct.unpack("<I", data[4:8])
    if advertised + 8 != len(data):
        raise _metadata_error("WebP RIFF size does not match the payload")
    position = 12
    count = 0
    while position < len(data):
        count += 1
        if count > max_chunks:
            raise _metadata_error("WebP chunk count exceeds the limit", max_chunks=max_chunks)
        if position + 8 > len(data):
            raise _metadata_error("WebP chunk header is truncated")
        kind = data[position : position + 4]
        (size,) = struct.unpack("<I", data[position + 4 : position + 8])
        data_end = position + 8 + size
        padded_end = data_end + (size & 1)
        if data_end > len(data):
            raise _metadata_error("WebP chunk data is truncated")
        if padded_end > len(data):
            raise _metadata_error("WebP chunk padding is truncated")
        yield kind, data[position + 8 : data_end]
        position = padded_end


def _webp_chunk(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("<I", len(payload)) + payload + (b"\x00" if len(payload) & 1 else b"")


def _vp8l_has_alpha(payload: bytes) -> bool:
    if len(payload) < 5 or payload[0] != 0x2F:
        return False
    (bits,) = struct.unpack("<I", payload[1:5])
    return bool(bits & (1 << 28))


_WEBP_FLAG_BITS = {b"ICCP": 0x20, b"ALPH": 0x10, b"EXIF": 0x08, b"ANIM": 0x02, b"ANMF": 0x02}


def _embed_webp(data: bytes, packet: bytes, width: int, height: int) -> bytes:
    chunks = list(iter_webp_chunks(data))
    parts = [b"RIFF\x00\x00\x00\x00WEBP"]
    if not any(kind == b"VP8X" for kind, _ in chunks):
        flags = 0x04
        for kind, payload in chunks:
            flags |= _WEBP_FLAG_BITS.get(kind, 0)
            if kind == b"VP8L" and _vp8l_has_alpha(payload):
                flags |= 0x10
        if not (1 <= width <= 1 << 24 and 1 <= height <= 1 << 24):
            raise _metadata_error("WebP canvas dimensions are too large")
        header = bytes([flags, 0, 0, 0])
        header += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
        parts.append(_webp_chunk(b"VP8X", header))
    for kind, payload in chunks:
        if kind == b"XMP ":
            continue
        if kind == b"VP8X":
            if len(payload) != 10:
                raise _metadata_error("WebP VP8X chunk is malformed")
            payload = bytes([payload[0] | 0x04]) + payload[1:]
        parts.append(_webp_chunk(kind, payload))
    parts.append(_webp_chunk(b"XMP ", packet))
    output = bytearray(b"".join(parts))
    if len(output) - 8 > 0xFFFFFFFF:
        raise _metadata_error("WebP container is too large")
    output[4:8] = struct.pack("<I", len(output) - 8)
    return bytes(output)


def _extract_webp(data: bytes) -> bytes | None:
    for kind, payload in iter_webp_chunks(data):
        if kind == b"XMP ":
            return _bounded_packet(payload)
    return None


# -- public API ---------------------------------------------------------------------------------


def _bounded_packet(packet: bytes) -> bytes:
    if not packet or len(packet) > MAX_XMP_PACKET_BYTES:
        raise _metadata_error(
            "embedded XMP record exceeds the size limit", maximum_bytes=MAX_XMP_PACKET_BYTES
        )
    return packet


def embed_metadata(
    data: bytes,
    expected_format: OutputFormat | str,
    record: Mapping[str, Any] | bytes,
    limits: ImageLimits | None = None,
) -> tuple[bytes, ImageInfo]:
    """Embed ``record`` as XMP; return the new bytes and their verified metadata."""
    limits = limits or ImageLimits()
    encoded = encode_json_object(
        record, limit=MAX_EMBEDDED_METADATA_BYTES, what="embedded metadata"
    )
    try:
        source = inspect_image(data, limits)
    except BridgeError as error:
        raise _verification_error(error) from error
    try:
        expected = OutputFormat(expected_format)
    except ValueError as exc:
        raise _metadata_error("embedded metadata target format is not supported") from exc
    if source.format is not expected:
        raise _metadata_error("embedded metadata target format does not match the image")
    packet = xmp_packet(encoded)
    if source.format is OutputFormat.PNG:
        embedded = _embed_png(data, packet)
    elif source.format is OutputFormat.JPEG:
        embedded = _embed_jpeg(data, packet)
    else:
        embedded = _embed_webp(data, packet, source.width, source.height)
    try:
        result = inspect_image(embedded, limits)
    except BridgeError as error:
        raise _verification_error(error) from error
    if (result.format, result.width, result.height) != (
        source.format,
        source.width,
        source.height,
    ):
        raise _metadata_error("embedded metadata changed the verified image properties")
    return embedded, result


def extract_metadata(data: bytes, limits: ImageLimits | None = None) -> bytes | None:
    """The embedded JSON record, or ``None`` when the image carries none."""
    try:
        info = inspect_image(data, limits or ImageLimits())
    except BridgeError as error:
        raise _verification_error(error) from error
    if info.format is OutputFormat.PNG:
        packet = _extract_png(data)
    elif info.format is OutputFormat.JPEG:
        packet = _extract_jpeg(data)
    else:
        packet = _extract_webp(data)
    if packet is None:
        return None
    start = packet.find(_XMP_OPEN)
    end = packet.find(_XMP_CLOSE, start + len(_XMP_OPEN)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise _metadata_error("embedded XMP record is malformed")
    try:
        decoded = base64.b64decode(packet[start + len(_XMP_OPEN) : end], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _metadata_error("embedded XMP record is malformed") from exc
    if _parse_object(decoded, MAX_EMBEDDED_METADATA_BYTES) is None:
        raise _metadata_error("embedded XMP record is malformed")
    return decoded


def extract_metadata_record(
    data: bytes, limits: ImageLimits | None = None
) -> dict[str, Any] | None:
    """:func:`extract_metadata`, parsed."""
    encoded = extract_metadata(data, limits)
    return None if encoded is None else _parse_object(encoded, MAX_EMBEDDED_METADATA_BYTES)


# -- generation record --------------------------------------------------------------------------


def build_generation_record(
    *,
    request_id: str,
    created: int,
    operation: Mapping[str, Any],
    original_prompt: str,
    effective_prompt: str,
    negative_prompt: str | None,
    policies: Mapping[str, Any],
    provider: str,
    model: str,
    requested: Mapping[str, Any],
    effective: Mapping[str, Any],
    normalizations: list[Any],
    revised_prompt: str | None,
    usage: Mapping[str, Any] | None,
    session: Mapping[str, Any] | None,
    timings: Mapping[str, Any],
    warnings: list[str],
    image: Mapping[str, Any],
) -> dict[str, Any]:
    """The embedded generation record , as a plain dict.

    ``operation`` is ``{kind, input_images, reference_images, mask}``; ``image`` is
    ``{index, format, width, height}``; ``timings`` is ``{queue_ms, provider_ms,
    generation_ms?}``. Empty lists and absent optionals are omitted.
    """
    record: dict[str, Any] = {
        "version": 1,
        "kind": "imagegen_bridge_generation",
        "request_id": request_id,
        "created": created,
        "operation": dict(operation),
        "original_prompt": original_prompt,
    }
    if effective_prompt != original_prompt:
        record["effective_prompt"] = effective_prompt
    if negative_prompt is not None:
        record["negative_prompt"] = negative_prompt
    record.update(
        {
            "policies": dict(policies),
            "provider": provider,
            "model": model,
            "requested": dict(requested),
            "effective": dict(effective),
        }
    )
    if normalizations:
        record["normalizations"] = list(normalizations)
    if revised_prompt is not None:
        record["revised_prompt"] = revised_prompt
    if usage is not None:
        record["usage"] = dict(usage)
    if session is not None:
        record["session"] = dict(session)
    record["timings"] = dict(timings)
    if warnings:
        record["warnings"] = list(warnings)
    record["image"] = dict(image)
    return record


def fit_generation_record(
    record: Mapping[str, Any], *, max_bytes: int = MAX_EMBEDDED_METADATA_BYTES
) -> tuple[dict[str, Any], bytes]:
    """Drop optional fields (:data:`RECORD_TRIM_ORDER`) until the record fits ``max_bytes``.

    Each removal is listed in ``omitted_fields``. Returns the final record and its
    compact JSON encoding.
    """
    fitted = dict(record)
    omitted: list[str] = []
    encoded = _compact_json(fitted, "generation record")
    for name in RECORD_TRIM_ORDER:
        if len(encoded) <= max_bytes:
            break
        if name not in fitted:
            continue
        del fitted[name]
        omitted.append(name)
        fitted["omitted_fields"] = list(omitted)
        encoded = _compact_json(fitted, "generation record")
    if len(encoded) > max_bytes:
        raise _metadata_error(
            "embedded artifact metadata exceeds the portable 40 KiB limit",
            maximum_bytes=max_bytes,
            actual_bytes=len(encoded),
        )
    return fitted, encoded


async def aembed_metadata(
    data: bytes,
    expected_format: OutputFormat | str,
    record: Mapping[str, Any] | bytes,
    limits: ImageLimits | None = None,
) -> tuple[bytes, ImageInfo]:
    """:func:`embed_metadata` in a worker thread."""
    return await asyncio.to_thread(embed_metadata, data, expected_format, record, limits)


async def aextract_metadata(data: bytes, limits: ImageLimits | None = None) -> bytes | None:
    """:func:`extract_metadata` in a worker thread."""
    return await asyncio.to_thread(extract_metadata, data, limits)
