"""The scale benchmark's settings and its probes of a running cluster: idle CPU, open files
and their limit, partition states in ZooKeeper, how many partitions the brokers serve."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterable
from pathlib import Path

from bench.common import cpu_seconds
from minibroker import localcluster
from minibroker.client.admin import BrokerDescription, BrokerUnreachable, describe_broker
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import TopicPartitionStateZNode
from minibroker.runtime.zk_store import Stat, ZkStore

TOPIC = "scale"
REPLICATION_FACTOR = 3
BROKERS = 3
SETTLE_S = 5.0  # after start-up, before sampling idle CPU: the last ISR and HW work ends
IDLE_WINDOW_S = 15.0
SEED = 9  # the replica assignment's two random draws


def budget_s(partitions: int) -> float:
    """How long one phase (start-up, a broker's return) may take before the run gives up."""
    return 60.0 + partitions * 0.03


# ---- process figures from /proc -------------------------------------------------------------


def idle_cpu_pct(pids: dict[str, int], window_s: float) -> dict[str, float]:
    """CPU% of each process over `window_s` of wall time (100% = one core)."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.monotonic()
    time.sleep(window_s)  # the measurement window itself, not a synchronisation
    elapsed = time.monotonic() - started
    return {name: (cpu_seconds(pid) - before[name]) / elapsed * 100 for name, pid in pids.items()}


def open_files(pid: int) -> int:
    """How many file descriptors the process holds."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def open_files_limit(pid: int) -> int:
    """The process's soft limit on open files (/proc/<pid>/limits)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
    except (OSError, ValueError):
        pass
    return -1


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def allow_open_files(partitions: int) -> int:
    """Raise this process's open-file limit, which the cluster's processes inherit, to what
    `partitions` need: a broker keeps each replica's log and index open (Kafka does too, and
    its docs ask for a limit of 100,000 or more). Raising the hard limit needs root; without,
    the soft limit goes up to the hard one. Returns the soft limit now in force."""
    want = 4 * partitions + 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---- what the cluster holds --------------------------------------------------------------------


def read_states(zk: ZkStore, partitions: Iterable[int]) -> dict[int, tuple[LeaderAndIsr, Stat]]:
    """The topic's state znodes that exist among `partitions`, with their stats (pipelined)."""
    paths = {p: TopicPartitionStateZNode.path(TopicPartition(TOPIC, p)) for p in partitions}
    got = zk.get_many(paths.values())
    out = {}
    for p, path in paths.items():
        node = got[path]
        if node is not None:
            out[p] = (TopicPartitionStateZNode.decode(node[0], node[1].version), node[1])
    return out


def describe_all(state: localcluster.ClusterState) -> dict[int, BrokerDescription]:
    out = {}
    for b in state.by_role("broker"):
        if localcluster.is_alive(b) and b.id is not None:
            try:
                out[b.id] = describe_broker(b.address, timeout_s=30.0)
            except BrokerUnreachable:
                continue
    return out


def serving_count(descriptions: dict[int, BrokerDescription], partitions: int) -> int:
    """Partitions whose every replica serves: exactly one broker leads it with an ISR of
    RF members, every follower named in its ISR has fetched from it (the leader knows its
    LEO), and each follower follows that leader at that leader epoch."""
    count = 0
    for p in range(partitions):
        tp = TopicPartition(TOPIC, p)
        replicas = {b: d.partitions[tp] for b, d in descriptions.items() if tp in d.partitions}
        leaders = [r for r in replicas.values() if r.is_leader]
        if len(leaders) != 1 or len(leaders[0].isr) != REPLICATION_FACTOR:
            continue
        leader = leaders[0]
        followers = [b for b in leader.isr if b != leader.leader]
        fetched = all(
            (r := leader.remote(b)) is not None and r.log_end_offset >= 0 for b in followers
        )
        agree = all(
            b in replicas
            and replicas[b].leader == leader.leader
            and replicas[b].leader_epoch == leader.leader_epoch
            for b in followers
        )
        count += fetched and agree
    return count


# ---- one run ------------------------------------------------------------------------------------
