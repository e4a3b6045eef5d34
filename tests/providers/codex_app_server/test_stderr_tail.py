from __future__ import annotations

from imagebridge.providers.codex_app_server.stderr_tail import StderrRing, redact


def test_ring_keeps_only_the_last_bytes_and_counts_all() -> None:
    ring = StderrRing(16)
    for index in range(10):
        ring.write(f"line {index}\n".encode())
    assert len(ring) == 16
    assert ring.total_bytes == 70
    assert ring.tail(100).endswith("line 9")
    ring.write(b"z" * 100)
    assert len(ring) == 16
    assert ring.total_bytes == 170


def test_tail_starts_at_a_line_boundary_when_cut() -> None:
    ring = StderrRing(1024)
    ring.write(b"first partial line\nsecond line\nthird line\n")
    assert ring.tail(20) == "third line"


def test_redact_removes_tokens_payloads_and_colours() -> None:
    jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyIn0.c2ln"
    text = (
        "\x1b[31mERROR\x1b[0m Authorization: Bearer abc.def-123 "
        f"id_token={jwt} key sk-proj-ABCDEFGH12345678 "
        '"access_token": "tok_secret_value" '
        f"image {'QUJD' * 40}"
    )
    cleaned = redact(text)
    for secret in ("abc.def-123", jwt, "sk-proj-ABCDEFGH12345678", "tok_secret_value", "QUJD" * 40):
        assert secret not in cleaned
    assert "\x1b" not in cleaned
    assert cleaned.startswith("ERROR")
    assert "<redacted>" in cleaned


def test_redacted_tail_of_a_ring() -> None:
    ring = StderrRing(4096)
    ring.write(b"request failed: Bearer sekrit-token-value\n")
    assert "sekrit" not in ring.tail()
