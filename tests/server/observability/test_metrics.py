"""Prometheus exposition: the original's families, every image by surface, and the gauges
read from the stores at scrape time (bounded in frequency and time)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from imagebridge.engine.provider import AccountCounters
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.jobs.outcomes import ImageOutcome, image_shares
from imagebridge.server.metrics import BridgeMetrics
from imagebridge.storage.records import KeyLimits, KeyRecord
from imagebridge.storage.rules.keys import windows_at, zone
from tests.server.conftest import ServeFactory
from tests.support.fakes import FakeProvider
from tests.support.runtime import make_runtime
from tests.support.waiting import wait_until


def _metrics(*providers: Any, **settings: Any) -> BridgeMetrics:
    runtime = make_runtime(*(providers or (FakeProvider("ready"),)))
    return BridgeMetrics(runtime, runtime.registry.providers, **settings)


def _value(text: str, series: str) -> float | None:
    """The value of the one sample whose name and labels are exactly ``series``."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_exposition_has_the_original_families_and_labels() -> None:
    metrics = _metrics()
    metrics.record(
        provider="ready",
        code=None,
        total_ms=1500,
        provider_ms=1200,
        queue_ms=10,
        generated_bytes=70,
        normalizations=2,
    )
    metrics.record(provider="ready", code="invalid_request", total_ms=3)
    text = metrics.render().decode()
    success = 'code="none",provider="ready",result="success"'
    failure = 'code="invalid_request",provider="ready",result="error"'
    assert f"imagegen_bridge_requests_total{{{success}}} 1.0" in text
    assert f"imagegen_bridge_requests_total{{{failure}}} 1.0" in text
    bucket = 'imagegen_bridge_operation_duration_seconds_bucket{code="none",le="%s",'
    bucket += 'provider="ready",result="success"} %s'
    assert bucket % ("0.100", "0.0") in text
    assert bucket % ("1.000", "0.0") in text
    assert bucket % ("5.000", "1.0") in text
    assert bucket % ("1800.000", "1.0") in text
    assert bucket % ("+Inf", "1.0") in text
    assert f"imagegen_bridge_operation_duration_seconds_sum{{{success}}} 1.5" in text
    assert f"imagegen_bridge_generated_bytes_total{{{success}}} 70.0" in text
    assert f"imagegen_bridge_normalizations_total{{{success}}} 2.0" in text
    assert f"imagegen_bridge_provider_duration_seconds_count{{{success}}} 1.0" in text
    assert f"imagegen_bridge_provider_duration_seconds_count{{{failure}}}" not in text
    assert 'imagegen_bridge_queue_depth{provider="none",scope="global"} 0.0' in text
    assert 'imagegen_bridge_queue_depth{provider="ready",scope="provider"} 0.0' in text
    assert 'imagegen_bridge_circuit_state{provider="ready",state="closed"} 1.0' in text
    assert 'imagegen_bridge_circuit_state{provider="ready",state="open"} 0.0' in text
    assert 'imagegen_bridge_circuit_rejections_total{provider="ready"} 0.0' in text
    assert "_created" not in text
    assert "imagegen_bridge_provider_restarts_total{" not in text  # no child process here


def test_each_app_has_its_own_registry() -> None:
    first, second = _metrics(), _metrics()
    first.record(provider="ready", code=None, total_ms=1)
    assert "requests_total{" in first.render().decode()
    assert "requests_total{" not in second.render().decode()


def test_every_family_has_the_one_prefix() -> None:
    metrics = _metrics()
    metrics.image_outcome(ImageOutcome("jobs", "ready", "m", "k", 1, 1, None, queued_seconds=1))
    names = re.findall(r"^# TYPE (\S+) ", metrics.render().decode(), re.MULTILINE)
    assert names and all(name.startswith("imagegen_bridge_") for name in names)


def test_an_outcome_is_split_by_account_and_adds_up_to_the_images_asked_for() -> None:
    # A fan-out of 4 on a pool: 2 from "a", 1 from "b", one chunk failed naming "b".
    outcome = ImageOutcome(
        "images", "codex", "gpt-image-2", "team", 4, 3, None, served_by={"a": 2, "b": 1}
    )
    shares = [("a", "delivered", 2), ("b", "delivered", 1), (None, "failed", 1)]
    assert image_shares(outcome) == shares
    unknown = ImageOutcome("jobs", "codex", None, None, 2, 0, "timeout", unknown=True, account="b")
    assert image_shares(unknown) == [("b", "unknown", 2)]
    metrics = _metrics()
    metrics.image_outcome(outcome)
    metrics.image_outcome(unknown)
    text = metrics.render().decode()
    images = 'imagegen_bridge_images_total{account="%s",key="%s",model="%s",outcome="%s",'
    images += 'provider="codex",route="%s"}'
    assert _value(text, images % ("a", "team", "gpt-image-2", "delivered", "images")) == 2
    assert _value(text, images % ("b", "team", "gpt-image-2", "delivered", "images")) == 1
    assert _value(text, images % ("(none)", "team", "gpt-image-2", "failed", "images")) == 1
    assert _value(text, images % ("b", "(none)", "(default)", "unknown", "jobs")) == 2
    operations = 'imagegen_bridge_image_operations_total{code="%s",key="%s",provider="codex",'
    operations += 'route="%s"}'
    assert _value(text, operations % ("none", "team", "images")) == 1
    assert _value(text, operations % ("timeout", "(none)", "jobs")) == 1


def test_key_and_model_labels_are_bounded_with_an_other_bucket() -> None:
    metrics = _metrics(max_key_labels=2, max_model_labels=1)
    for index in range(5):
        outcome = ImageOutcome("images", "ready", f"model-{index}", f"key-{index}", 1, 1, None)
        metrics.image_outcome(outcome)
    text = metrics.render().decode()
    keys = set(re.findall(r'imagegen_bridge_images_total\{[^}]*key="([^"]+)"', text))
    models = set(re.findall(r'imagegen_bridge_images_total\{[^}]*model="([^"]+)"', text))
    assert keys == {"key-0", "key-1", "(other)"}
    assert models == {"model-0", "(other)"}
    other = 'imagegen_bridge_images_total{account="(none)",key="(other)",model="(other)",'
    other += 'outcome="delivered",provider="ready",route="images"}'
    assert _value(text, other) == 3


def test_a_jobs_wait_and_run_are_timed() -> None:
    metrics = _metrics()
    metrics.image_outcome(
        ImageOutcome("jobs", "ready", "m", None, 1, 1, None, seconds=2.5, queued_seconds=7)
    )
    text = metrics.render().decode()
    wait = 'imagegen_bridge_job_wait_duration_seconds_bucket{le="%s",provider="ready"}'
    assert _value(text, wait % "5.000") == 0 and _value(text, wait % "10.000") == 1
    run = 'imagegen_bridge_image_operation_duration_seconds_sum{provider="ready",'
    run += 'result="success",route="jobs"}'
    assert _value(text, run) == 2.5


def test_admission_limits_are_exposed_beside_the_queue_depth() -> None:
    provider = FakeProvider("ready")
    runtime = make_runtime(provider)
    runtime.global_gate.max_queued = 20
    runtime.global_gate.max_concurrent = 10
    text = BridgeMetrics(runtime, runtime.registry.providers).render().decode()
    assert _value(text, 'imagegen_bridge_queue_limit{provider="none",scope="global"}') == 20
    assert _value(text, 'imagegen_bridge_admitted_limit{provider="none",scope="global"}') == 10
    assert _value(text, 'imagegen_bridge_admitted{provider="none",scope="global"}') == 0
    # An unlimited gate has no limit series (an alert never divides by it).
    assert 'imagegen_bridge_queue_limit{provider="ready"' not in text


class _Keys:
    """A key service double: one read counted per list, optionally slow."""

    def __init__(self, records: list[KeyRecord], delay: float = 0.0) -> None:
        self.stored = records
        self.delay = delay
        self.reads = 0
        self.running = 0
        self.peak = 0

    def windows(self) -> Any:
        return windows_at(1_700_000_000, zone("UTC"))

    async def records(self) -> list[KeyRecord]:
        self.reads += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.running -= 1
        return self.stored


def _key(name: str, created: int, used: int, **limits: Any) -> KeyRecord:
    windows = windows_at(1_700_000_000, zone("UTC"))
    return KeyRecord(
        id=f"id-{name}",
        name=name,
        prefix="ibk_xxxxxxxx",
        created_at=created,
        updated_at=created,
        revoked_at=None,
        limits=KeyLimits(**limits),
        used={"day": (windows.day, used)},
    )


async def test_key_quota_gauges_are_read_once_per_period_however_many_scrapes() -> None:
    keys = _Keys([_key("alpha", 1, 3, images_per_day=10), _key("beta", 2, 0)])
    metrics = _metrics(scrape_cache_ms=60_000)
    texts = await asyncio.gather(*(metrics.scrape(keys=keys, jobs=None) for _ in range(5)))
    assert keys.reads == 1
    text = texts[-1].decode()
    assert _value(text, 'imagegen_bridge_key_quota_limit{key="alpha",window="day"}') == 10
    assert _value(text, 'imagegen_bridge_key_quota_used{key="alpha",window="day"}') == 3
    assert _value(text, 'imagegen_bridge_key_quota_remaining{key="alpha",window="day"}') == 7
    assert 'key="beta"' not in text  # no limit, nothing to show
    assert _value(text, 'imagegen_bridge_keys{state="active"}') == 2
    assert _value(text, 'imagegen_bridge_scrape_source_up{source="keys"}') == 1


async def test_a_slow_source_keeps_its_last_reading_and_is_not_started_twice() -> None:
    keys = _Keys([_key("alpha", 1, 3, images_per_day=10)])
    metrics = _metrics(scrape_cache_ms=0, scrape_timeout_ms=200)
    first = (await metrics.scrape(keys=keys, jobs=None)).decode()
    assert _value(first, 'imagegen_bridge_key_quota_used{key="alpha",window="day"}') == 3
    keys.delay = 1.0
    keys.stored = [_key("alpha", 1, 4, images_per_day=10)]
    loop = asyncio.get_running_loop()
    started = loop.time()
    late = [(await metrics.scrape(keys=keys, jobs=None)).decode() for _ in range(3)]
    assert loop.time() - started < 1.0  # each scrape waited 200 ms at most, not 1 s
    assert keys.peak == 1 and keys.reads == 2  # the slow read was left running, once
    for text in late:
        assert _value(text, 'imagegen_bridge_scrape_source_up{source="keys"}') == 0
        assert _value(text, 'imagegen_bridge_key_quota_used{key="alpha",window="day"}') == 3
    await asyncio.sleep(1.0)  # the slow read lands; its answer is kept
    keys.delay = 0.0
    landed = (await metrics.scrape(keys=keys, jobs=None)).decode()
    assert _value(landed, 'imagegen_bridge_key_quota_used{key="alpha",window="day"}') == 4
    assert _value(landed, 'imagegen_bridge_scrape_source_up{source="keys"}') == 1
    assert keys.reads == 3


async def test_key_quota_series_stay_within_the_key_label_budget() -> None:
    records = [_key(f"k{index}", index, 1, images_per_day=5) for index in range(4)]
    metrics = _metrics(max_key_labels=2, scrape_cache_ms=0)
    text = (await metrics.scrape(keys=_Keys(records), jobs=None)).decode()
    labelled = set(re.findall(r'imagegen_bridge_key_quota_limit\{key="([^"]+)"', text))
    assert labelled == {"k0", "k1"}  # the oldest keys, in creation order


class _PoolProvider(FakeProvider):
    """Two pool accounts: one ready at 40 % used, one out of quota."""

    def account_counters(self) -> list[AccountCounters]:
        return [AccountCounters("main", True, 1, 5, 0), AccountCounters("spare", False, 0, 2, 1)]

    async def diagnostics(self) -> dict[str, Any]:
        window = {"name": "image_gen.primary", "label": "5h", "limit": "image_gen"}
        return {
            "accounts": {
                "pool": True,
                "accounts": [
                    {
                        "name": "main",
                        "ready": True,
                        "reason": None,
                        "quota": {
                            "image_remaining_percent": 60.0,
                            "image_windows": [
                                {**window, "used_percent": 40.0, "resets_at": 1_700_003_600}
                            ],
                        },
                    },
                    {
                        "name": "spare",
                        "ready": False,
                        "reason": "quota_exhausted",
                        "quota": {
                            "image_remaining_percent": 0.0,
                            "image_windows": [{**window, "used_percent": 100.0}],
                        },
                    },
                ],
            }
        }


async def test_pool_accounts_state_and_quota_are_gauges() -> None:
    metrics = _metrics(_PoolProvider("codex"))
    text = (await metrics.scrape(keys=None, jobs=None)).decode()
    assert _value(text, 'imagegen_bridge_account_ready{account="main",provider="codex"}') == 1
    assert _value(text, 'imagegen_bridge_account_ready{account="spare",provider="codex"}') == 0
    blocked = 'imagegen_bridge_account_blocked{account="spare",provider="codex",'
    assert _value(text, blocked + 'reason="quota_exhausted"}') == 1
    assert 'imagegen_bridge_account_blocked{account="main"' not in text
    remaining = 'imagegen_bridge_account_quota_remaining_percent{account="%s",provider="codex"}'
    assert _value(text, remaining % "main") == 60 and _value(text, remaining % "spare") == 0
    used = 'imagegen_bridge_account_quota_used_percent{account="main",provider="codex",window="5h"}'
    assert _value(text, used) == 40
    reset = "imagegen_bridge_account_quota_reset_timestamp_seconds"
    assert _value(text, reset + '{account="main",provider="codex",window="5h"}') == 1_700_003_600


@pytest.mark.usefixtures("fresh_storage_health")
async def test_storage_health_is_read_at_every_scrape() -> None:
    metrics = _metrics(scrape_cache_ms=60_000)
    ok = (await metrics.scrape(keys=None, jobs=None)).decode()
    STORAGE_HEALTH.failed("artifacts", "no_space")
    bad = (await metrics.scrape(keys=None, jobs=None)).decode()
    assert _value(ok, 'imagegen_bridge_storage_degraded{area="artifacts"}') == 0
    assert _value(bad, 'imagegen_bridge_storage_degraded{area="artifacts"}') == 1
    assert _value(bad, 'imagegen_bridge_storage_fault{area="artifacts",reason="no_space"}') == 1
    assert _value(bad, 'imagegen_bridge_storage_degraded{area="database"}') == 0


JOB = {"operation": "generate", "prompt": "a counted fox", "parameters": {"size": "8x8", "n": 2}}


def test_jobs_are_counted_once_with_their_wait_and_key(serve: ServeFactory) -> None:
    admin = "metrics-admin-1"
    server = serve(
        "server.metrics.enabled=true",
        "server.keys.enabled=true",
        'server.bearer_token_env="METRICS_ADMIN"',
        env={"METRICS_ADMIN": admin},
    )
    boss = {"authorization": f"Bearer {admin}"}
    with server.client(headers=boss) as client:
        created = client.post("/v1/keys", json={"name": "night-shift", "images_per_day": 3})
        secret = created.json()["secret"]
        worker = {"authorization": f"Bearer {secret}"}
        first = client.post("/v1/jobs", json=JOB, headers=worker).json()["id"]
        second = client.post("/v1/jobs", json=JOB, headers=worker).json()["id"]  # 4 > 3: refused
        mine = client.post("/v1/jobs", json={**JOB, "parameters": {"size": "8x8"}}).json()["id"]

        def finished() -> bool:
            states = [
                client.get(f"/v1/jobs/{job}", headers=worker).json()["status"]
                for job in (first, second)
            ]
            states.append(client.get(f"/v1/jobs/{mine}").json()["status"])
            return all(state in {"succeeded", "failed"} for state in states)

        assert wait_until(finished, timeout=30)
        text = client.get("/metrics").text
    images = 'imagegen_bridge_images_total{account="(none)",key="%s",model="%s",outcome="%s",'
    images += 'provider="mock",route="jobs"}'
    assert _value(text, images % ("night-shift", "mock-image-1", "delivered")) == 2
    assert _value(text, images % ("night-shift", "(default)", "failed")) == 2  # the refusal
    assert _value(text, images % ("(none)", "mock-image-1", "delivered")) == 1
    operations = 'imagegen_bridge_image_operations_total{code="%s",key="%s",provider="mock",'
    operations += 'route="jobs"}'
    assert _value(text, operations % ("rate_limited", "night-shift")) == 1
    assert _value(text, 'imagegen_bridge_job_wait_duration_seconds_count{provider="mock"}') == 3
    assert _value(text, 'imagegen_bridge_jobs{status="succeeded"}') == 2
    # The original's synchronous-only family stays as the original defines it.
    assert "imagegen_bridge_requests_total{" not in text


def test_a_failed_synchronous_request_counts_the_images_it_asked_for(serve: ServeFactory) -> None:
    server = serve("server.metrics.enabled=true")
    body = {"operation": "generate", "prompt": "[mock:fail=upstream] x", "parameters": {"n": 3}}
    with server.client() as client:
        assert client.post("/v1/images", json=body).status_code >= 500
        invalid = {"operation": "generate", "prompt": "", "parameters": {"n": 2}}
        assert client.post("/v1/images", json=invalid).status_code == 422
        text = client.get("/metrics").text
    images = 'imagegen_bridge_images_total{account="(none)",key="(none)",model="(default)",'
    images += 'outcome="%s",provider="mock",route="images"}'
    # The upstream failure's 3 images (failed, or unknown: the call may have run), and
    # the invalid request's 2, refused before any call.
    failed, unknown = (_value(text, images % outcome) or 0 for outcome in ("failed", "unknown"))
    assert failed + unknown == 5 and failed >= 2
    operations = 'imagegen_bridge_image_operations_total{code="%s",key="(none)",provider="mock",'
    operations += 'route="images"}'
    assert _value(text, operations % "upstream") == 1
    assert _value(text, operations % "invalid_request") == 1
