"""A real Prometheus scrapes two bridges after a known workload: PromQL over the scraped
series gives exact image counts per route, key and provider; the shipped rules evaluate
cleanly on them; every panel query of the shipped Grafana dashboard runs.

Each bridge has keys (``alice``, ``bob``), metrics and jobs on, and two providers: the mock
and a second one (``alt``). The workload covers the four surfaces (``/v1/images``, its
stream, the OpenAI-compatible route, ``/v1/jobs``), each key and the admin.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.prometheus_server import Prometheus, missing_binaries, running_prometheus
from tests.server.conftest import LiveServer, ServeFactory, servers
from tests.server.doubles import with_mock
from tests.support.fakes import FakeProvider
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(bool(missing_binaries()), reason=f"missing: {missing_binaries()}"),
]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "imagebridge.json"
ADMIN = "prometheus-admin-token-7f1"
ENV = {"PROM_ADMIN": ADMIN}
SETS = (
    "server.keys.enabled=true",
    'server.bearer_token_env="PROM_ADMIN"',
    "server.metrics.enabled=true",
    "server.jobs.enabled=true",
)


@dataclass(frozen=True)
class Call:
    """One operation of the workload: where, how, as whom, on which provider, how many."""

    instance: int
    route: str
    key: str | None
    provider: str
    n: int


WORKLOAD = [
    Call(0, "images", "alice", "mock", 2),
    Call(0, "stream", "bob", "alt", 1),
    Call(0, "openai", "alice", "mock", 3),
    Call(0, "jobs", "bob", "mock", 2),
    Call(0, "images", None, "alt", 1),
    Call(1, "images", "bob", "mock", 1),
    Call(1, "stream", "alice", "mock", 2),
    Call(1, "openai", "bob", "mock", 1),
    Call(1, "jobs", "alice", "alt", 1),
    Call(1, "jobs", None, "mock", 2),
]
FAILED = Call(1, "images", "alice", "mock", 2)
"""One failure (the mock told to fail upstream): its images are failed or unknown."""


def _body(call: Call, prompt: str = "a scraped fox") -> dict[str, Any]:
    return {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"n": call.n, **({"size": "8x8"} if call.provider == "mock" else {})},
        "routing": {"provider": call.provider},
    }


def _run(client: httpx.Client, call: Call, token: str) -> None:
    auth = {"authorization": f"Bearer {token}"}
    if call.route == "images":
        response = client.post("/v1/images", json=_body(call), headers=auth)
        assert response.status_code == 200, response.text
    elif call.route == "stream":
        response = client.post("/v1/images/stream", json=_body(call), headers=auth)
        assert response.status_code == 200 and "event: completed" in response.text, response.text
    elif call.route == "openai":
        assert call.provider == "mock"
        body = {"model": "mock-image-1", "prompt": "a scraped fox", "n": call.n, "size": "auto"}
        response = client.post("/v1/images/generations", json=body, headers=auth)
        assert response.status_code == 200, response.text
        assert len(response.json()["data"]) == call.n
    else:
        made = client.post("/v1/jobs", json=_body(call), headers=auth)
        assert made.status_code == 202, made.text
        url = f"/v1/jobs/{made.json()['id']}"
        assert wait_until(
            lambda: client.get(url, headers=auth).json()["status"] == "succeeded", timeout=60
        )


@dataclass(frozen=True)
class Scraped:
    prometheus: Prometheus
    at: float
    """A time at which both instances' last scrape came after the whole workload."""

    def by(self, label: str, selector: str = 'outcome="delivered"') -> dict[str, float]:
        expr = f'sum by ({label}) (imagegen_bridge_images_total{{job="bridge",{selector}}})'
        return {
            item["metric"].get(label, ""): float(item["value"][1])
            for item in self.prometheus.query(expr, self.at)
        }


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    with servers(tmp_path_factory.mktemp("bridges")) as serve:
        yield from _scraped(serve, tmp_path_factory.mktemp("prometheus"))


def _scraped(serve: ServeFactory, directory: Path) -> Iterator[Scraped]:
    providers = with_mock(FakeProvider("alt"))
    bridges: list[LiveServer] = [serve(*SETS, providers=providers, env=ENV) for _ in range(2)]
    secrets: list[dict[str | None, str]] = []
    for bridge in bridges:
        tokens: dict[str | None, str] = {None: ADMIN}
        with bridge.client(headers={"authorization": f"Bearer {ADMIN}"}) as client:
            for name in ("alice", "bob"):
                created = client.post("/v1/keys", json={"name": name, "images_per_day": 50})
                assert created.status_code == 201, created.text
                tokens[name] = created.json()["secret"]
        secrets.append(tokens)
    targets = [f"127.0.0.1:{bridge.port}" for bridge in bridges]
    with running_prometheus(directory, targets, ADMIN, [RULES]) as prometheus:

        def scraped_after(moment: float) -> bool:
            result = prometheus.query('timestamp(up{job="bridge"} == 1)')
            return len(result) == 2 and min(float(r["value"][1]) for r in result) > moment

        # Targets come from discovery a few seconds after start: scraped before the workload,
        # so every counter has samples before and after it (rate() needs two).
        assert wait_until(lambda: scraped_after(0), timeout=60, interval=0.5)
        for call in WORKLOAD:
            with bridges[call.instance].client(timeout=60) as client:
                _run(client, call, secrets[call.instance][call.key])
        with bridges[FAILED.instance].client(timeout=60) as client:
            token = secrets[FAILED.instance][FAILED.key]
            failing = _body(FAILED, prompt="[mock:fail=upstream] a fox")
            response = client.post(
                "/v1/images", json=failing, headers={"authorization": f"Bearer {token}"}
            )
            assert response.status_code >= 500
        finished = time.time()
        assert wait_until(lambda: scraped_after(finished + 2), timeout=60, interval=0.5)
        yield Scraped(prometheus, time.time())


def _expected(label: str) -> dict[str, float]:
    counts: Counter[str] = Counter()
    for call in WORKLOAD:
        value = {"route": call.route, "key": call.key or "(none)", "provider": call.provider}
        counts[value[label]] += call.n
    return {name: float(count) for name, count in counts.items()}


@pytest.mark.parametrize("label", ["route", "key", "provider"])
def test_promql_gives_exact_image_counts(scraped: Scraped, label: str) -> None:
    assert scraped.by(label) == _expected(label)


def test_promql_gives_exact_counts_per_route_key_and_provider_together(scraped: Scraped) -> None:
    expr = (
        "sum by (route, key, provider) "
        '(imagegen_bridge_images_total{job="bridge",outcome="delivered"})'
    )
    got = {
        (m["metric"]["route"], m["metric"]["key"], m["metric"]["provider"]): float(m["value"][1])
        for m in scraped.prometheus.query(expr, scraped.at)
    }
    expected: Counter[tuple[str, str, str]] = Counter()
    for call in WORKLOAD:
        expected[(call.route, call.key or "(none)", call.provider)] += call.n
    assert got == {labels: float(count) for labels, count in expected.items()}


def test_failures_and_operations_are_counted_too(scraped: Scraped) -> None:
    lost = scraped.by("key", 'outcome=~"failed|unknown"')
    assert lost == {"alice": float(FAILED.n)}
    operations = scraped.prometheus.query(
        'sum by (instance) (imagegen_bridge_image_operations_total{job="bridge"})', scraped.at
    )
    per_instance = sorted(float(item["value"][1]) for item in operations)
    calls = Counter(call.instance for call in [*WORKLOAD, FAILED])
    assert per_instance == sorted(float(count) for count in calls.values())
    jobs = scraped.prometheus.query(
        'sum(imagegen_bridge_job_wait_duration_seconds_count{job="bridge"})', scraped.at
    )
    assert float(jobs[0]["value"][1]) == sum(1 for call in WORKLOAD if call.route == "jobs")


def test_the_shipped_rules_evaluate_cleanly_on_live_series(scraped: Scraped) -> None:
    def evaluated() -> bool:
        return all(rule["lastEvaluation"][:4] != "0001" for rule in scraped.prometheus.rules())

    assert wait_until(evaluated, timeout=30, interval=0.5)
    rules = scraped.prometheus.rules()
    assert len(rules) >= 18
    for rule in rules:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
    rate = scraped.prometheus.query('imagegen_bridge:images:rate5m{route="jobs"}')
    assert rate and all(float(item["value"][1]) >= 0 for item in rate)


def _panel_queries() -> Iterator[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def _grafana(expr: str) -> str:
    """The query as Grafana sends it with every bridge job selected."""
    return expr.replace("$__rate_interval", "1m").replace("$job", ".*")


def test_every_dashboard_panel_query_runs(scraped: Scraped) -> None:
    queries = list(_panel_queries())
    assert len(queries) >= 20
    names = {
        item["metric"]["__name__"]
        for item in scraped.prometheus.query('{__name__=~"imagegen_bridge_.+"}', scraped.at)
    }
    answered = 0
    for title, expr in queries:
        assert "$" not in _grafana(expr), (title, expr)
        result = scraped.prometheus.query(_grafana(expr), scraped.at)
        used = set(re.findall(r"imagegen_bridge_[a-z_]+", expr))
        # Families the workload made (no pool, no finite admission queue here) must show.
        if all(
            name in names or f"{name}_bucket" in names or f"{name}_total" in names for name in used
        ):
            answered += bool(result)
            assert result, (title, expr)
    assert answered >= 12


def test_the_dashboard_is_grafana_json_with_the_promised_panels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    titles = {panel["title"] for panel in dashboard["panels"]}
    for promised in (
        "Images delivered per API key",
        "Images delivered per pool account",
        "Operation latency percentiles by surface",
        "API key quota used",
        "Pool account image windows used",
    ):
        assert promised in titles
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {item["name"] for item in dashboard["templating"]["list"]}
    assert variables == {"datasource", "job"}
