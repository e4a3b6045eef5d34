from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import inspect_image
from imagebridge.imaging.metadata import (
    MAX_EMBEDDED_METADATA_BYTES,
    MAX_WEBP_CHUNKS,
    aembed_metadata,
    aextract_metadata,
    build_generation_record,
    embed_metadata,
    extract_metadata,
    extract_metadata_record,
    fit_generation_record,
    iter_webp_chunks,
    xmp_packet,
)
from tests.artifacts.images import decode_rgba, encode, noise, png_chunk

RECORD = b'{"prompt":"a paper fox","model":"gpt-image-2"}'


def sources() -> dict[str, tuple[bytes, OutputFormat]]:
    rgba = Image.fromarray(noise(3, 2))
    rgb = Image.fromarray(noise(3, 2, alpha=False))
    return {
        "png": (encode(rgba, "PNG"), OutputFormat.PNG),
        "jpeg": (encode(rgb, "JPEG"), OutputFormat.JPEG),
        "webp-lossless-alpha": (encode(rgba, "WEBP", lossless=True), OutputFormat.WEBP),
        "webp-lossy": (encode(rgb, "WEBP"), OutputFormat.WEBP),
        "webp-lossy-alpha": (encode(rgba, "WEBP"), OutputFormat.WEBP),
    }


def artifact_error(call: object) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.code is ErrorCode.ARTIFACT
    return caught.value


@pytest.mark.parametrize("name", sorted(sources()))
def test_embeds_and_extracts_all_supported_formats_without_changing_pixels(name: str) -> None:
    source, fmt = sources()[name]
    before = inspect_image(source)
    assert extract_metadata(source) is None
    embedded, info = embed_metadata(source, fmt, RECORD)
    assert (info.format, info.width, info.height) == (fmt, 3, 2)
    assert info.sha256 != before.sha256
    assert info == inspect_image(embedded)
    assert np.array_equal(decode_rgba(embedded), decode_rgba(source))
    assert extract_metadata(embedded) == RECORD
    # Re-embedding replaces the record instead of stacking a second one.
    replaced, _ = embed_metadata(embedded, fmt, {"version": 2})
    assert extract_metadata(replaced) == b'{"version":2}'
    assert replaced.count(b"<igb:Metadata>") == 1
    assert np.array_equal(decode_rgba(replaced), decode_rgba(source))


def test_jpeg_existing_xmp_segments_are_replaced_not_stacked() -> None:
    source, _ = sources()["jpeg"]
    first, _ = embed_metadata(source, "jpeg", {"n": 1})
    second, _ = embed_metadata(first, "jpeg", {"n": 2})
    assert second.count(b"http://ns.adobe.com/xap/1.0/\x00") == 1
    assert second[2:4] == b"\xff\xe1"  # the APP1 follows SOI
    assert len(second) == len(first)


def test_webp_simple_file_becomes_extended_with_flags() -> None:
    source, _ = sources()["webp-lossless-alpha"]
    assert source[12:16] == b"VP8L"
    embedded, _ = embed_metadata(source, "webp", RECORD)
    chunks = list(iter_webp_chunks(embedded))
    assert [kind for kind, _ in chunks] == [b"VP8X", b"VP8L", b"XMP "]
    vp8x = chunks[0][1]
    assert vp8x[0] == 0x04 | 0x10  # XMP + alpha (VP8L alpha bit)
    assert int.from_bytes(vp8x[4:7], "little") + 1 == 3
    assert int.from_bytes(vp8x[7:10], "little") + 1 == 2
    assert struct.unpack("<I", embedded[4:8])[0] == len(embedded) - 8
    lossy, _ = sources()["webp-lossy"]
    first_kind, first_payload = next(iter_webp_chunks(embed_metadata(lossy, "webp", RECORD)[0]))
    assert (first_kind, first_payload[0]) == (b"VP8X", 0x04)


def test_png_xmp_is_an_uncompressed_itxt_chunk_before_iend() -> None:
    source, _ = sources()["png"]
    embedded, _ = embed_metadata(source, "png", RECORD)
    iend = embedded.rindex(b"IEND")
    body = b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp_packet(RECORD)
    chunk = png_chunk(b"iTXt", body)
    assert embedded[iend - 4 - len(chunk) : iend - 4] == chunk


def test_rejects_non_object_and_oversized_metadata() -> None:
    source, _ = sources()["png"]
    for bad in (b"[]", b"", b"not json", b'{"a": NaN}', b"\xff\xfe{}"):
        assert artifact_error(lambda bad=bad: embed_metadata(source, "png", bad))
    oversized = b'{"a":"' + b"a" * MAX_EMBEDDED_METADATA_BYTES + b'"}'
    error = artifact_error(lambda: embed_metadata(source, "png", oversized))
    assert "40 KiB" in error.message
    assert artifact_error(lambda: embed_metadata(source, "png", {"x": {1, 2}}))


def test_target_format_must_match_the_image() -> None:
    source, _ = sources()["png"]
    error = artifact_error(lambda: embed_metadata(source, "jpeg", RECORD))
    assert error.message == "embedded metadata target format does not match the image"
    broken = artifact_error(lambda: embed_metadata(source[:-12], "png", RECORD))
    assert broken.message == "image failed verification while embedding metadata"


def test_maximum_metadata_record_fits_the_jpeg_app1_container() -> None:
    record = b'{"value":"' + b"a" * (MAX_EMBEDDED_METADATA_BYTES - 12) + b'"}'
    assert len(record) == MAX_EMBEDDED_METADATA_BYTES
    source, _ = sources()["jpeg"]
    embedded, _ = embed_metadata(source, "jpeg", record)
    assert extract_metadata(embedded) == record


def webp_container(chunks: int) -> bytes:
    data = b"RIFF\0\0\0\0WEBP" + b"JUNK\0\0\0\0" * chunks
    return data[:4] + struct.pack("<I", len(data) - 8) + data[8:]


def test_webp_chunk_cursor_enforces_a_work_limit() -> None:
    assert sum(1 for _ in iter_webp_chunks(webp_container(MAX_WEBP_CHUNKS))) == MAX_WEBP_CHUNKS
    error = artifact_error(lambda: list(iter_webp_chunks(webp_container(MAX_WEBP_CHUNKS + 1))))
    assert "chunk count exceeds" in error.message


def test_webp_chunk_cursor_can_stop_before_unrelated_trailing_bytes() -> None:
    data = b"RIFF\0\0\0\0WEBPXMP \0\0\0\0x"
    data = data[:4] + struct.pack("<I", len(data) - 8) + data[8:]
    chunks = iter_webp_chunks(data)
    assert next(chunks) == (b"XMP ", b"")
    with pytest.raises(BridgeError):
        next(chunks)  # only judged when the cursor actually goes on


def test_webp_riff_size_and_truncation_are_checked() -> None:
    good = webp_container(1)
    assert artifact_error(lambda: list(iter_webp_chunks(good + b"\0\0")))
    truncated = good[:4] + struct.pack("<I", len(good) - 8 + 4) + good[8:] + b"JUNK"
    assert "truncated" in artifact_error(lambda: list(iter_webp_chunks(truncated))).message


def test_extraction_rejects_malformed_and_oversized_packets() -> None:
    source, _ = sources()["png"]
    iend = source.rindex(b"IEND") - 4

    def with_itxt(packet: bytes) -> bytes:
        chunk = png_chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + packet)
        return source[:iend] + chunk + source[iend:]

    bad_base64 = with_itxt(b"<igb:Metadata>!!!</igb:Metadata>")
    assert artifact_error(lambda: extract_metadata(bad_base64)).message == (
        "embedded XMP record is malformed"
    )
    assert artifact_error(lambda: extract_metadata(with_itxt(b"<x/>")))
    huge = with_itxt(b"<igb:Metadata>" + b"A" * (57 * 1024) + b"</igb:Metadata>")
    assert "size limit" in artifact_error(lambda: extract_metadata(huge)).message


def test_extract_record_parses_json() -> None:
    source, fmt = sources()["png"]
    embedded, _ = embed_metadata(source, fmt, {"kind": "imagegen_bridge_generation"})
    assert extract_metadata_record(embedded) == {"kind": "imagegen_bridge_generation"}
    assert extract_metadata_record(source) is None


def generation_record(**overrides: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "request_id": "request-1",
        "created": 1_700_000_000,
        "operation": {"kind": "generate", "input_images": 0, "reference_images": 0, "mask": False},
        "original_prompt": "a lighthouse",
        "effective_prompt": "a lighthouse",
        "negative_prompt": None,
        "policies": {"compatibility": "strict"},
        "provider": "mock",
        "model": "mock-image",
        "requested": {"size": "auto"},
        "effective": {"size": "1024x1024"},
        "normalizations": [],
        "revised_prompt": None,
        "usage": None,
        "session": None,
        "timings": {"queue_ms": 1, "provider_ms": 40, "generation_ms": 41},
        "warnings": [],
        "image": {"index": 0, "format": "png", "width": 1, "height": 1},
    }
    fields.update(overrides)
    return build_generation_record(**fields)  # type: ignore[arg-type]


def test_generation_record_omits_empty_and_unchanged_fields() -> None:
    record = generation_record()
    assert record["kind"] == "imagegen_bridge_generation"
    assert record["version"] == 1
    for absent in ("effective_prompt", "negative_prompt", "normalizations", "warnings", "usage"):
        assert absent not in record
    changed = generation_record(effective_prompt="a lighthouse, at dusk", warnings=["w"])
    assert changed["effective_prompt"] == "a lighthouse, at dusk"
    assert changed["warnings"] == ["w"]


def test_record_fits_by_dropping_optional_fields_in_order() -> None:
    record = generation_record(
        revised_prompt="r" * 50 * 1024, usage={"total_tokens": 3}, warnings=["slow"]
    )
    fitted, encoded = fit_generation_record(record)
    assert len(encoded) <= MAX_EMBEDDED_METADATA_BYTES
    assert fitted["omitted_fields"] == ["usage", "warnings", "revised_prompt"]
    assert json.loads(encoded) == fitted
    small, _ = fit_generation_record(generation_record(usage={"total_tokens": 3}))
    assert "omitted_fields" not in small and small["usage"] == {"total_tokens": 3}
    too_big = generation_record(original_prompt="p" * 41 * 1024)
    error = artifact_error(lambda: fit_generation_record(too_big))
    assert error.message == "embedded artifact metadata exceeds the portable 40 KiB limit"


def test_trimming_follows_the_order_and_stops_as_soon_as_the_record_fits() -> None:
    big = [{"field": "parameters.size", "reason": "x" * 1024} for _ in range(45)]
    record = generation_record(
        usage={"total_tokens": 3},
        session={"key": "s", "reused": False},
        normalizations=big,
        warnings=["slow"],
        revised_prompt="a revised lighthouse",
    )
    fitted, encoded = fit_generation_record(record)
    assert len(encoded) <= MAX_EMBEDDED_METADATA_BYTES
    assert fitted["omitted_fields"] == ["usage", "session", "normalizations"]
    assert fitted["warnings"] == ["slow"]
    assert fitted["revised_prompt"] == "a revised lighthouse"
    assert "usage" not in fitted and "session" not in fitted and "normalizations" not in fitted


async def test_async_wrappers() -> None:
    source, fmt = sources()["png"]
    embedded, _ = await aembed_metadata(source, fmt, RECORD)
    assert await aextract_metadata(embedded) == RECORD
