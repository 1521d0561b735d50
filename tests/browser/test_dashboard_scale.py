"""The dashboard at 1,000 partitions in a real browser: every row renders, and every ISR change
in ZooKeeper reaches the page without a reload (how fast is a figure, not a test's assertion:
`python -m bench dashboard` reports it; this test prints its delays). Changes: a follower
paused while records go to some of the partitions it follows (their leaders drop it: Kafka
2.5+ drops only a follower that lacks data), then resumed (they take it back). Each delay is
from ZooKeeper's mtime of the partition's state znode to the moment the page's row showed the
new ISR (one machine, one clock). A long ZooKeeper session keeps the paused broker registered:
the changes are the leaders' own ISR writes, not a failover (whose figures `python -m bench
dashboard` reports).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from minibroker.client import Producer
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import TopicPartitionStateZNode
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.browser.browser import Page, browser_or_skip, console_errors, dashboard, screenshots_dir
from tests.integration.conftest import Cluster, running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.browser]

TOPIC = "wide"
PARTITIONS = 1000
WRITTEN = 30  # partitions that get a record while the follower is paused
FOLLOWER = 3
States = dict[int, tuple[LeaderAndIsr, int]]  # partition -> (state, mtime ms)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("dash-scale") / "cluster"
    with running_cluster(d, "--set", "zookeeper.session.timeout.ms=30000") as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=10_000)
        zk.start()
        try:
            c = Cluster(d, state, zk)
            c.cli("topics", "create", TOPIC, "--partitions", str(PARTITIONS),
                  "--replication-factor", "3", "--wait")  # fmt: skip
            yield c
        finally:
            zk.stop()


def states(zk: ZkStore) -> States:
    paths = {p: TopicPartitionStateZNode.path(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    got = zk.get_many(paths.values())
    out = {}
    for p, path in paths.items():
        node = got[path]
        assert node is not None, f"{path} is missing"
        out[p] = (TopicPartitionStateZNode.decode(node[0], node[1].version), node[1].mtime_ms)
    return out


def wait_states(zk: ZkStore, ok: Callable[[int, LeaderAndIsr], bool], what: str) -> States:
    def all_ok() -> States | None:
        now = states(zk)
        return now if all(ok(p, s) for p, (s, _m) in now.items()) else None

    found: States = wait_until(all_ok, timeout_s=60, what=what, interval_s=0.5)
    return found


def isr_text(s: LeaderAndIsr) -> str:
    return ",".join(str(b) for b in sorted(s.isr))


def delays_ms(page: Page, before: States, after: States) -> list[int]:
    """Once the page showed every ISR that differs from `before` in `after`: each one's delay
    from its znode's mtime."""
    want = {
        f"{TOPIC}-{p}": (isr_text(s), mtime)
        for p, (s, mtime) in after.items()
        if isr_text(s) != isr_text(before[p][0])
    }
    shown: dict[tuple[str, str], int] = {}

    def all_shown() -> bool:
        for key, isr, t in page.seen():
            shown.setdefault((key, isr), t)
        return all((key, isr) in shown for key, (isr, _m) in want.items())

    wait_until(all_shown, timeout_s=30, what=f"{len(want)} ISR changes on the page")
    return [shown[(key, isr)] - mtime for key, (isr, mtime) in want.items()]


def produce_one_each(cluster: Cluster, partitions: list[int]) -> None:
    async def send() -> None:
        live = [p.address for p in cluster.state.by_role("broker") if p.id != FOLLOWER]
        async with Producer(live, acks=1, linger_ms=5) as producer:
            for p in partitions:
                await producer.send(TOPIC, b"x", partition=p)
            await producer.flush()

    asyncio.run(send())


def test_a_thousand_partitions_render_and_every_isr_change_reaches_the_page(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    driver = browser_or_skip()
    log = cluster.dir.parent / "dashboard.log"
    try:
        with dashboard("--dir", str(cluster.dir), log=log) as url:
            driver.get(url)
            page = Page(driver, url, screenshots_dir(tmp_path_factory))
            full = (
                "return document.querySelectorAll(`tr[data-topic='wide'][data-isr='1,2,3']`).length"
            )
            wait_until(
                lambda: driver.execute_script(full) == PARTITIONS,
                timeout_s=60,
                what=f"{PARTITIONS} rows, each with its full ISR",
                interval_s=0.25,
            )
            page.watch_isrs()
            before = wait_states(cluster.zk, lambda _p, s: len(s.isr) == 3, "full ISRs")
            written = [p for p, (s, _m) in before.items() if s.leader != FOLLOWER][:WRITTEN]
            cluster.cli("cluster", "pause", f"broker-{FOLLOWER}")
            try:
                produce_one_each(cluster, written)
                shrunk = wait_states(
                    cluster.zk,
                    lambda p, s: p not in written or FOLLOWER not in s.isr,
                    f"broker {FOLLOWER} out of the ISRs of the {WRITTEN} written partitions",
                )
                shrinks = delays_ms(page, before, shrunk)
                page.shot("thousand-partitions")
            finally:
                cluster.cli("cluster", "resume", f"broker-{FOLLOWER}")
            grown = wait_states(cluster.zk, lambda _p, s: len(s.isr) == 3, "the ISRs back")
            expands = delays_ms(page, shrunk, grown)
            assert len(shrinks) == WRITTEN == len(expands)
            delays = sorted(shrinks + expands)
            print(f"{len(delays)} ISR changes at {PARTITIONS} partitions: znode -> page median "
                  f"{delays[len(delays) // 2]} ms, max {delays[-1]} ms")  # fmt: skip
            assert console_errors(driver) == []
    finally:
        driver.quit()
