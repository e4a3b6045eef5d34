"""Memory per in-flight 4096×4096 PNG request, relative to the PNG's encoded size.

A real bridge process (``python -m`` style, uvicorn on 127.0.0.1) serves ``POST
/v1/images`` from a provider double that returns one photo-like 4096×4096 PNG (gradient
plus noise, so it compresses like a real render: ~20-30 MB encoded) as base64, the way a
Codex answer arrives. The bridge decodes it, fully verifies it (Pillow decodes every
pixel), and delivers it as ``b64_json`` (or as an ``artifact``: written to the store,
metadata only in the answer).

For each case a fresh server is started, warmed up with small images, its peak-RSS mark
(``VmHWM``) reset to the current RSS, then ``N`` requests are sent at once and every
answer is read in full. It prints

    memory.<format>.c<N> <(VmHWM - baseline RSS) / (N x encoded PNG bytes)> <target>

Target ``<= 4`` for ``b64_json`` with N = 4 concurrent requests: the base64 text the
provider received (1.33x), the decoded bytes (1x), the verified pixels while Pillow holds
them (RGB is stored 4 bytes per pixel: ~2.5x of a typical encoded size, freed after
verification) and the outgoing base64 and JSON (1.33x each) must not all be alive at
once, nor be copied needlessly. Usage: ``.venv/bin/python bench/memory.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from _server import ServerProcess  # bench/ is on sys.path when a benchmark runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EDGE = 4096
MiB = 1024 * 1024
CASES = [("b64_json", 1, "report"), ("b64_json", 4, "<=4"), ("artifact", 4, "report")]


def photo_like_png(path: Path) -> int:
    """Write a 4096² RGB PNG that compresses like a photo; return its encoded size."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(4096)
    ramp = np.linspace(0, 200, EDGE, dtype=np.float32)
    pixels = np.empty((EDGE, EDGE, 3), dtype=np.float32)
    pixels[..., 0] = ramp[None, :]
    pixels[..., 1] = ramp[:, None]
    pixels[..., 2] = 90
    pixels += rng.normal(0, 3, (EDGE, EDGE, 3)).astype(np.float32)  # sensor-like noise
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    path.write_bytes(buffer.getvalue())
    return len(buffer.getvalue())


# -- server child ------------------------------------------------------------------------


def serve(png_path: str, data_dir: str) -> None:
    """Child mode: the bridge with a provider double answering with ``png_path``'s image."""
    import uvicorn
    from tests.support.fakes import FakeProvider
    from tests.support.images import png_bytes

    from imagebridge.application import build_application
    from imagebridge.config import load_config
    from imagebridge.server import ServerOptions, create_app
    from imagebridge.server.serve import apply_malloc_settings, uvicorn_config

    big = Path(png_path).read_bytes()
    small = png_bytes(64, 64)

    class FixtureProvider(FakeProvider):
        """Big image for measured requests, a small one for the warm-up."""

        def response(self, request: Any, context: Any) -> Any:
            self.image = small if request.prompt.startswith("warm") else big
            return super().response(request, context)

    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": data_dir},
        sets=[
            'default_provider="fixture"',
            "providers.codex_responses.enabled=false",
            "providers.codex_app_server.enabled=false",
            "server.tracing.enabled=false",
        ],
    )
    config = loaded.config
    apply_malloc_settings(config)  # as the served process does (server.malloc)
    application = build_application(config, providers=[FixtureProvider("fixture", image=big)])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    app = create_app(
        config,
        application=application,
        origins=loaded.origins,
        options=ServerOptions(listener=("127.0.0.1", port)),
    )
    print(f"listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn_config(app, config)).run(sockets=[sock])


# -- driver ------------------------------------------------------------------------------


class Child(ServerProcess):
    """The bridge serving the fixture PNG, with its memory counters from ``/proc``."""

    def __init__(self, png: Path, data_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
        super().__init__([__file__, "--serve", str(png), str(data_dir)], env, cwd=data_dir)
        try:
            self.base_url = self.url()
        except RuntimeError:
            self.stop()
            raise

    def status(self, key: str) -> int:
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        match = re.search(rf"^{key}:\s+(\d+) kB", text, re.MULTILINE)
        return int(match.group(1)) * 1024 if match else 0

    def reset_peak(self) -> bool:
        try:
            Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")
        except OSError:
            return False
        return True


async def send(url: str, count: int, response_format: str, prompt: str) -> list[int]:
    body = {
        "operation": "generate",
        "prompt": prompt,
        "output": {"response_format": response_format},
    }
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        answers = await asyncio.gather(
            *(client.post("/v1/images", json=body) for _ in range(count))
        )
    for answer in answers:
        answer.raise_for_status()
    return [len(answer.content) for answer in answers]


def measure(png: Path, encoded: int, response_format: str, count: int) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as scratch:
        child = Child(png, Path(scratch))
        try:
            for _ in range(3):
                asyncio.run(send(child.base_url, 2, response_format, "warm-up"))
            time.sleep(0.2)
            baseline = child.status("VmRSS")
            reset = child.reset_peak()
            sizes = asyncio.run(send(child.base_url, count, response_format, "measured"))
            peak = child.status("VmHWM")
        finally:
            child.stop()
    note = (
        f"baseline {baseline / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB, "
        f"answers {sizes[0] / MiB:.1f} MiB each" + ("" if reset else ", HWM not resettable")
    )
    return (peak - baseline) / (count * encoded), note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", nargs=2, metavar=("PNG", "DATA_DIR"))
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        png = Path(scratch) / "photo-4096.png"
        encoded = photo_like_png(png)
        print(f"# {EDGE}x{EDGE} PNG, {encoded / MiB:.1f} MiB encoded")
        rows = []
        for response_format, count, target in CASES:
            ratio, note = measure(png, encoded, response_format, count)
            print(f"# {response_format} x{count}: {note}")
            rows.append((f"memory.{response_format}.c{count}", ratio, target))
    print(f"# run took {time.monotonic() - started:.1f} s")
    for name, ratio, target in rows:
        print(f"{name} {ratio:.2f} {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
