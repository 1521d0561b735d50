"""Exactly-once scenarios (issue 29): a transaction coordinator killed mid-commit, a hung
transaction aborted by its timeout, a zombie producer fenced. Each drives confluent-kafka's
transactional producer (librdkafka) on the brokers' KAFKA listeners against a topic of its own,
next to the runner's usual load on the scenario topic, and checks what a read_committed consumer
sees: every record of a committed transaction exactly once, nothing of an aborted one.

confluent-kafka comes with the loadgen and test extras (`bash scripts/bootstrap.sh`); without it
these scenarios fail their first step with a one-line reason."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any

from minibroker.client.admin_zk import create_topic
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.types import TRANSACTION_STATE_TOPIC, TopicPartition
from minibroker.localcluster import ClusterState
from minibroker.scenarios.context import ScenarioContext, ScenarioStepFailed
from minibroker.scenarios.scenario import Scenario

TXN_TOPIC = "scenario-txn"
STATE_PARTITIONS = 50  # transaction.state.log.num.partitions (Kafka's default)
TIMEOUT_S = 60.0


def _kafka() -> Any:
    try:
        import confluent_kafka
    except ImportError:
        raise ScenarioStepFailed(
            "confluent-kafka is not installed (the loadgen and test extras have it: "
            "bash scripts/bootstrap.sh)"
        ) from None
    return confluent_kafka


def _bootstrap(ctx: ScenarioContext) -> str:
    brokers = ClusterState.load(ctx.cluster_dir).by_role("broker")
    ports = [f"{b.host}:{b.kafka_port}" for b in brokers if b.kafka_port]
    if not ports:
        raise ScenarioStepFailed("the cluster's brokers have no KAFKA listener")
    return ",".join(ports)


def _topic(ctx: ScenarioContext) -> None:
    create_topic(ctx.zk(), TXN_TOPIC, 2, 3, {"min.insync.replicas": "2"}, random.Random(0))
    ctx.wait(lambda: all(_leader(ctx, TXN_TOPIC, p) >= 0 for p in (0, 1)), f"{TXN_TOPIC} led")


def _leader(ctx: ScenarioContext, topic: str, partition: int) -> int:
    state = ctx.zk().read_partition_state(TopicPartition(topic, partition))
    return -1 if state is None else state.leader


def _producer(ctx: ScenarioContext, tid: str, **extra: Any) -> Any:
    p = _kafka().Producer({"bootstrap.servers": _bootstrap(ctx), "transactional.id": tid, **extra})
    p.init_transactions(TIMEOUT_S)
    return p


def _transaction(p: Any, values: Iterable[bytes]) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(TXN_TOPIC, v, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)


def _read_committed(ctx: ScenarioContext) -> Counter[bytes]:
    """Every value read_committed sees, read until both partitions reported their end (the
    LSO; librdkafka's partition EOF), not until a quiet spell: an idle timer can run out
    before a slow machine's consumer has fetched anything (issue 38)."""
    kafka = _kafka()
    consumer = kafka.Consumer(
        {"bootstrap.servers": _bootstrap(ctx), "group.id": f"check-{uuid.uuid4().hex[:8]}",
         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
         "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    # Assigned, not subscribed: no group to join (group.initial.rebalance.delay.ms).
    consumer.assign([kafka.TopicPartition(TXN_TOPIC, p, kafka.OFFSET_BEGINNING) for p in (0, 1)])
    seen: Counter[bytes] = Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while at_end != {0, 1} and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                seen[m.value() or b""] += 1
                at_end.discard(m.partition() or 0)
            elif m.error().code() == kafka.KafkaError._PARTITION_EOF:
                at_end.add(m.partition() or 0)
    finally:
        consumer.close()
    return seen


def _expect_exactly(ctx: ScenarioContext, committed: list[bytes], aborted: list[bytes]) -> None:
    seen = _read_committed(ctx)
    duplicated = sorted(v for v, n in seen.items() if n > 1)
    missing = sorted(set(committed) - set(seen))
    visible = sorted(set(aborted) & set(seen))
    ctx.expect(
        not duplicated and not missing,
        "read_committed shows every committed record exactly once",
        f"{len(duplicated)} duplicated, {len(missing)} missing of {len(committed)}",
        duplicated=[v.decode() for v in duplicated[:5]], missing=[v.decode() for v in missing[:5]],
    )  # fmt: skip
    ctx.expect(
        not visible, "nothing of an aborted transaction is visible",
        f"{len(visible)} of {len(aborted)} aborted records visible",
    )  # fmt: skip


def coordinator_failover_mid_commit(ctx: ScenarioContext) -> None:
    """Commit transactions; SIGKILL the transaction coordinator's broker while a commit is in
    flight; the producer carries on with the new coordinator (the commit either completes or,
    when the client must, aborts); then more transactions. The killed broker returns."""
    _topic(ctx)
    tid = "scenario-tx"
    p = _producer(ctx, tid)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for t in range(3):
        values = [b"c%d-%d" % (t, i) for i in range(20)]
        _transaction(p, values)
        committed += values
    victim = _leader(ctx, TRANSACTION_STATE_TOPIC, partition_for(tid, STATE_PARTITIONS))
    values = [b"mid-%d" % i for i in range(20)]
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(TXN_TOPIC, v, partition=i % 2)
    outcome: list[BaseException | None] = []
    commit = threading.Thread(target=lambda: outcome.append(_commit(p)), daemon=True)
    commit.start()
    ctx.act("kill", ctx.broker_name(victim), "the transaction coordinator, mid-commit")
    commit.join(TIMEOUT_S * 2)
    error = outcome[0] if outcome else TimeoutError("the commit never returned")
    if error is None:
        committed += values
    else:
        aborted += values
        ctx.timeline.note(f"the commit in flight failed ({error}); the transaction aborts")
        p = _recover(ctx, p, tid, error)
    for t in range(3):
        values = [b"after-%d-%d" % (t, i) for i in range(20)]
        _transaction(p, values)
        committed += values
    ctx.act("start", ctx.broker_name(victim), "the old coordinator returns")
    _expect_exactly(ctx, committed, aborted)


def _commit(p: Any) -> BaseException | None:
    try:
        p.commit_transaction(TIMEOUT_S)
        return None
    except Exception as exc:  # the caller decides: abort, or a new producer
        return exc


def _recover(ctx: ScenarioContext, p: Any, tid: str, error: BaseException) -> Any:
    err = error.args[0] if error.args else None
    if err is not None and hasattr(err, "txn_requires_abort") and err.txn_requires_abort():
        p.abort_transaction(TIMEOUT_S)
        return p
    return _producer(ctx, tid)  # fatal: a new instance takes over the id


def hung_transaction_times_out(ctx: ScenarioContext) -> None:
    """A producer opens a transaction and hangs (transaction.timeout.ms 3000); the LSO stays
    at its first record, so another producer's committed records wait; the coordinator aborts
    it with a bumped epoch, the LSO moves on and the hung producer is fenced."""
    _topic(ctx)
    hung = _producer(ctx, "scenario-hung", **{"transaction.timeout.ms": 3000})
    hung.begin_transaction()
    stuck = [b"hung-%d" % i for i in range(10)]
    for i, v in enumerate(stuck):
        hung.produce(TXN_TOPIC, v, partition=i % 2)
    hung.flush(TIMEOUT_S)
    ctx.timeline.note("a transaction is open and its producer hangs")
    other = _producer(ctx, "scenario-after-hung")
    later = [b"later-%d" % i for i in range(10)]
    _transaction(other, later)
    ctx.wait(lambda: set(later) <= set(_read_committed(ctx)),
             "the hung transaction aborted by its timeout, the LSO past it",
             timeout_s=TIMEOUT_S)  # fmt: skip
    fenced = _commit(hung)
    ctx.expect(fenced is not None, "the hung producer is fenced", f"its late commit: {fenced}")
    _expect_exactly(ctx, later, stuck)


def zombie_fenced(ctx: ScenarioContext) -> None:
    """Two instances of one transactional id: the new one's InitProducerId aborts the old
    one's open transaction and fences it; the zombie's late commit fails, its records never
    show."""
    _topic(ctx)
    zombie = _producer(ctx, "scenario-zombie")
    zombie.begin_transaction()
    ghost = [b"ghost-%d" % i for i in range(10)]
    for i, v in enumerate(ghost):
        zombie.produce(TXN_TOPIC, v, partition=i % 2)
    zombie.flush(TIMEOUT_S)
    fresh = _producer(ctx, "scenario-zombie")
    live = [b"live-%d" % i for i in range(10)]
    _transaction(fresh, live)
    late = _commit(zombie)
    ctx.expect(late is not None, "the zombie's commit is refused", f"it answered: {late}")
    _expect_exactly(ctx, live, ghost)


SCENARIOS = [
    Scenario(
        "txn-coordinator-failover",
        "SIGKILL the transaction coordinator's broker while a commit is in flight: the producer "
        "carries on with the new coordinator; read_committed shows every committed record "
        "exactly once and nothing aborted",
        coordinator_failover_mid_commit,
    ),
    Scenario(
        "txn-hung-timeout",
        "a transaction left open past its timeout holds the LSO, then the coordinator aborts "
        "it and fences its producer; the records committed after it become visible",
        hung_transaction_times_out,
    ),
    Scenario(
        "txn-zombie-fenced",
        "a second instance of a transactional id fences the first: the zombie's open "
        "transaction is aborted and its late commit refused",
        zombie_fenced,
    ),
]
