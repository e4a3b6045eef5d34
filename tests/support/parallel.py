"""How the suite shares several pytest-xdist workers (``scripts/check``: ``-n <cores + 1> --dist
loadgroup``). Without xdist, or with another ``--dist``, nothing here changes a run.

1. **A module's shared fixtures stay on one worker.** A test using a module-, class- or
   package-scoped fixture (a served bridge, the browser tests' server, the container tier's
   podman and dockerd) joins the group of the node that fixture belongs to, so the module (or
   package) goes whole to one worker and the fixture starts once, as in a serial run. Other
   tests are spread one by one. Session fixtures (the PostgreSQL server, the Ceph S3 gateway,
   Chromium) start once per worker: each worker is a session of its own, on its own free
   ports and temporary directories.
2. **An explicit ``xdist_group`` mark wins**: a test that must share a worker with others
   (and run after them, in collection order) names their group, e.g. ``tests/container``.
3. **``serial`` tests run alone.** A test marked ``serial`` measures the machine (latency
   under load): while it runs no other worker runs a test. Every test holds a shared lock for
   its whole protocol (setup, call, teardown); a ``serial`` one holds it exclusively, and a
   turnstile taken first keeps a stream of shared holders from starving it. The lock files
   live in the run's base temporary directory, which the run's workers share and no other
   run sees; they are taken outside pytest-timeout's timer, so waiting for a turn never
   times a test out.

xdist 3.8 groups ``--dist loadgroup`` by appending ``@group`` to node ids, which pytest 9.2's
structured node ids ignore (pytest-dev/pytest-xdist#1386): every test would be spread alone.
So the workers write the groups they collected to the run's directory and
:class:`_GroupScheduling`, the scheduler this plugin gives xdist for ``loadgroup``, reads them
(and still honours an ``@group`` suffix once xdist's own fix lands). It also hands out the
longest units first, by the durations the previous run left in pytest's cache, so that no
long test starts last while the other workers idle.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_SHARED_SCOPES = ("package", "module", "class")
_GROUPS = "xdist-groups"
_DURATIONS = "imagebridge/test-durations"


def _scope_name(definition: object) -> str:
    scope = getattr(definition, "scope", "function")
    return str(getattr(scope, "value", scope))


def _shared_fixture_node(item: pytest.Item) -> pytest.Node | None:
    """The widest package/module/class node whose fixture ``item`` uses, if any."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    used = {
        _scope_name(definitions[-1])
        for definitions in info.name2fixturedefs.values()
        if definitions and _scope_name(definitions[-1]) in _SHARED_SCOPES
    }
    kinds: tuple[tuple[str, type[pytest.Node]], ...] = (
        ("package", pytest.Package),
        ("module", pytest.Module),
        ("class", pytest.Class),
    )
    for scope, kind in kinds:
        if scope in used:
            return item.getparent(kind)
    return None


def _group(item: pytest.Item) -> str | None:
    names = sorted(
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    )
    return "_".join(names) if names else None


def _run_dir(config: pytest.Config) -> Path:
    """The directory every process of this run shares: the controller's base temp."""
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    base = factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        node = _shared_fixture_node(item)
        if node is not None:
            item.add_marker(pytest.mark.xdist_group(node.nodeid or "."))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends its collection
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):  # xdist sets it
        return
    groups = {item.nodeid: name for item in session.items if (name := _group(item))}
    folder = _run_dir(config) / _GROUPS
    folder.mkdir(exist_ok=True)
    worker = config.workerinput["workerid"]  # type: ignore[attr-defined]
    partial = folder / f"{worker}.json.part"
    partial.write_text(json.dumps(groups), encoding="utf-8")
    partial.replace(folder / f"{worker}.json")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    return _make_group_scheduling(config, log)


def _make_group_scheduling(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class _GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """``loadgroup``: a group's tests are one unit of work; other tests go one by one."""

        _groups: dict[str, str] | None = None
        _ordered = False

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:  # the first assignment: the whole queue is known
                self._ordered = True
                _longest_first(self.workqueue, _recorded_durations(config))
            super()._assign_work_unit(node)

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's own suffix, where it works
                return nodeid.rsplit("@", 1)[-1]
            if self._groups is None:
                self._groups = {}
                for path in sorted((_run_dir(config) / _GROUPS).glob("*.json")):
                    self._groups.update(json.loads(path.read_text(encoding="utf-8")))
            return self._groups.get(nodeid, nodeid)

    return _GroupScheduling(config, log)


def _longest_first(queue: dict[str, dict[str, bool]], durations: dict[str, float]) -> None:
    """Reorder the units of work, longest first by the last runs' durations (ties and units
    never timed keep xdist's order): a long unit left for the end runs alone on one worker
    while the others have nothing left to do."""
    if not durations:
        return
    units = list(queue.items())
    units.sort(key=lambda unit: -sum(durations.get(nodeid, 0.0) for nodeid in unit[1]))
    queue.clear()
    queue.update(units)


def _recorded_durations(config: pytest.Config) -> dict[str, float]:
    cache = getattr(config, "cache", None)
    recorded = cache.get(_DURATIONS, {}) if cache is not None else {}
    return recorded if isinstance(recorded, dict) else {}


class _DurationRecorder:
    """On the controller of a ``loadgroup`` run: each test's setup + call + teardown time,
    kept in pytest's cache for the next run's order (``-p no:cacheprovider`` keeps none)."""

    def __init__(self) -> None:
        self.durations: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(session.config, "cache", None)
        if cache is not None and self.durations:
            recorded = _recorded_durations(session.config)
            recorded.update({nodeid: round(s, 3) for nodeid, s in self.durations.items()})
            cache.set(_DURATIONS, recorded)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "loadgroup":
        config.pluginmanager.register(_DurationRecorder(), "imagebridge-durations")


def _locked(path: Path, operation: int) -> IO[bytes]:
    handle = path.open("ab")
    fcntl.flock(handle, operation)
    return handle


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's timer
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if not hasattr(item.config, "workerinput"):
        yield  # one process: nothing runs beside this test
        return
    folder = _run_dir(item.config)
    serial = item.get_closest_marker("serial") is not None
    with _locked(folder / "suite-turnstile.lock", fcntl.LOCK_EX) as turnstile:
        run = _locked(folder / "suite-run.lock", fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        run.close()  # closing the descriptor releases the lock
