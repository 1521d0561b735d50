"""The pytest plugin of minibroker.testing (registered through the `pytest11` entry point, so
installing minibroker is enough; it imports the cluster code only when a test asks for a
cluster): fixtures that hand a test a running cluster and a fresh topic, a marker that
configures the cluster, and on a failing test the cluster's timeline, partition states and
log tails attached to the report.

    @pytest.mark.minibroker(brokers=3, settings={"replica.lag.time.max.ms": 2000})
    def test_orders(minibroker_cluster, minibroker_topic):
        minibroker_cluster.kill(leader_of(minibroker_topic, 0))
        ...

- `minibroker_cluster`: a `minibroker.testing.Cluster`, shared by the tests of a module that
  ask for the same configuration (`scope="module"`, the default; `"session"` or `"function"`
  by the marker's `scope=` or the `minibroker_scope` ini option). The marker's other keywords
  are the Cluster's (`brokers`, `controllers`, `profile`, `settings`, `proxy`, `secure`,
  `compose`: the compose cluster, one at a time on a machine, so not under pytest-xdist).
- `minibroker_topic`: a topic of its own for each test (3 partitions, RF 3 where there are
  three brokers, min.insync.replicas 2), named after the test.
- `--minibroker-artifacts DIR`: a failing test's failure, timeline, states and log tails also
  go to DIR/<test>.txt. `--minibroker-keep`: clusters are left running, and the report says where.
"""

from __future__ import annotations

import re
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a test asks for a cluster: pytest starts as fast without
    from minibroker.testing.cluster import Cluster

SCOPES = ("function", "module", "session")
CLUSTER_KEYS = ("brokers", "controllers", "profile", "settings", "proxy", "secure", "compose")
_USED = pytest.StashKey["Cluster"]()
_STARTED_MS = pytest.StashKey[int]()
_REGISTRY = pytest.StashKey["Registry"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minibroker")
    group.addoption(
        "--minibroker-artifacts",
        default=None,
        metavar="DIR",
        help="write a failing test's cluster timeline and log tails under DIR",
    )
    group.addoption(
        "--minibroker-keep",
        action="store_true",
        help="leave the clusters running after the tests, and say where",
    )
    parser.addini("minibroker_scope", "the default scope of minibroker_cluster", default="module")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "minibroker(brokers=3, controllers=2, profile='demo', settings={}, proxy=False, "
        "secure=False, compose=False, scope='module'): the cluster minibroker_cluster hands "
        "this test",
    )


class Registry:
    """The running clusters by (owner, configuration): an owner is a test, a module or the
    session, after the scope; a cluster goes when its owner is done."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.clusters: dict[tuple[str, str], Cluster] = {}

    def get(self, owner: str, config: dict[str, Any]) -> Cluster:
        key = (owner, repr(sorted(config.items())))
        cluster = self.clusters.get(key)
        if cluster is None:
            from minibroker.testing.cluster import Cluster

            cluster = Cluster(keep=self.keep, **config).up()
            self.clusters[key] = cluster
        return cluster

    def close(self, owner: str | None = None) -> None:
        for key in [k for k in self.clusters if owner is None or k[0] == owner]:
            self.clusters.pop(key).down()


def _config(item: pytest.Item) -> tuple[str, dict[str, Any]]:
    marker = item.get_closest_marker("minibroker")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    scope = str(kwargs.pop("scope", item.config.getini("minibroker_scope")))
    if scope not in SCOPES:
        raise pytest.UsageError(f"minibroker scope {scope!r}: one of {', '.join(SCOPES)}")
    unknown = sorted(set(kwargs) - set(CLUSTER_KEYS))
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.minibroker: unknown {', '.join(unknown)}; "
            f"takes {', '.join(CLUSTER_KEYS)} and scope"
        )
    return scope, kwargs


@pytest.fixture(scope="session")
def _minibroker_registry(request: pytest.FixtureRequest) -> Iterator[Registry]:
    registry = Registry(bool(request.config.getoption("--minibroker-keep")))
    request.config.stash[_REGISTRY] = registry
    yield registry
    if registry.keep:
        for cluster in registry.clusters.values():
            print(f"\nminibroker: {cluster.deployment.kept()}")
    registry.close()


@pytest.fixture
def minibroker_cluster(
    request: pytest.FixtureRequest, _minibroker_registry: Registry
) -> Iterator[Cluster]:
    """A running cluster configured by the test's `minibroker` marker (see the module)."""
    item = request.node
    scope, config = _config(item)
    owner = {"function": item.nodeid, "module": item.module.__name__, "session": ""}[scope]
    cluster = _minibroker_registry.get(owner, config)
    item.stash[_USED] = cluster
    item.stash[_STARTED_MS] = _now_ms()
    yield cluster
    if scope == "function":
        _minibroker_registry.close(owner)


@pytest.fixture
def minibroker_topic(request: pytest.FixtureRequest, minibroker_cluster: Cluster) -> str:
    """A topic of this test's own: 3 partitions, RF 3 (or the broker count), min ISR 2."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:200] or "topic"
    replicas = min(3, minibroker_cluster.brokers)
    minibroker_cluster.create_topic(
        name, partitions=3, replication_factor=replicas,
        min_insync_replicas=min(2, replicas),
    )  # fmt: skip
    return name


def _now_ms() -> int:
    return int(time.time() * 1000)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    cluster = item.stash.get(_USED, None)
    if cluster is None or not report.failed or report.when == "teardown":
        return report
    from minibroker.testing.failure_report import failure_report

    text = failure_report(cluster, item.stash.get(_STARTED_MS, 0))
    report.sections.append(("minibroker", text))
    artifacts = item.config.getoption("--minibroker-artifacts")
    if artifacts:
        out = Path(artifacts)
        out.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", item.nodeid)[:200]
        failure = f"{item.nodeid} failed ({report.when}):\n{report.longreprtext}\n\n"
        (out / f"{name}.txt").write_text(failure + text)
    return report


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A module's clusters go when its last test is done."""
    registry = item.config.stash.get(_REGISTRY, None)
    if registry is None:
        return
    module = getattr(item, "module", None)
    following = getattr(nextitem, "module", None) if nextitem is not None else None
    if module is not None and module is not following:
        registry.close(module.__name__)
