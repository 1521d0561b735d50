"""Kafka's transaction protocol under a delayed message, reproduced on a real cluster (issue 41
§2): each scenario drives a transactional producer of our own (producer.py: the delayed
produce must land at a moment an unmodified client's retries will not pick) next to
unmodified confluent-kafka clients, a read_committed reader records what it gets, and the
history checker (minibroker.history.check) says what went wrong, with the cluster's events and
the scenario's own steps around it.

- hanging-transaction: a produce delayed past its transaction's abort lands after the abort
  marker. Kafka 2.6's leader starts a transaction on any transactional batch
  (ProducerStateManager: the first transactional batch of a producer opens one), the
  coordinator has nothing open for that producer, so nothing ever ends it: the partition's
  last stable offset stops there and every read_committed consumer of it stalls, also behind
  later transactions that committed (KAFKA-12671; Jepsen's Bufstream 0.1.0 analysis).
- delayed-produce-next-transaction: the same delayed produce lands while the producer's next
  transaction is open on that partition. Same producer id, same epoch, the next sequence
  number: the leader takes it into the open transaction, which commits, so a record of the
  aborted transaction is read (an aborted read).

The defences, each a switch (Defences): with `transaction.partition.verification.enable`
(KIP-890 part 1) the leader asks the coordinator first and refuses the produce delayed past the
abort, but not the one that lands in the next transaction (that transaction has the partition,
at the same epoch); with `transaction.version` 2 (KIP-890 part 2; our producer then ends its
transactions with EndTxn v5) every transaction ends at a bumped epoch and the leaders refuse
both delayed produces, whose epoch is older (INVALID_PRODUCER_EPOCH).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minibroker.history.check import EXACTLY_ONCE, CheckResult, check
from minibroker.history.recorder import HistoryRecorder, load
from minibroker.history.txn_workload import read_to_the_end
from minibroker.runtime.clock import now_ms
from minibroker.runtime.waiting import wait_until
from minibroker.testing import Cluster
from minibroker.txn_delay.leaders import LeaderView, leaders_now
from minibroker.txn_delay.producer import Held, OwnTransactionalProducer

TIMEOUT_MS = 5_000  # the producers' transaction.timeout.ms, and the checker's
VERIFY = "transaction.partition.verification.enable"
TRANSACTION_VERSION = "transaction.version"
PARTITIONS = 2
CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Step:
    """One thing a scenario did, in the report's timeline next to the cluster's events."""

    ts_ms: int
    text: str
    is_story: bool = True

    def __str__(self) -> str:
        return f"{time.strftime('%H:%M:%S', time.gmtime(self.ts_ms / 1000))}." + (
            f"{self.ts_ms % 1000:03d}  step  {self.text}"
        )


@dataclass
class Stage:
    """What a scenario's steps work with: the cluster, a topic of its own, recorders."""

    cluster: Cluster
    topic: str
    folder: Path
    epoch_bump: bool = False  # our producer ends its transactions with EndTxn v5
    steps: list[Step] = field(default_factory=list)
    _recorders: list[HistoryRecorder] = field(default_factory=list)

    def recorder(self, name: str) -> HistoryRecorder:
        r = HistoryRecorder(self.folder / f"{name}.jsonl", name=name)
        self._recorders.append(r)
        return r

    def step(self, text: str) -> None:
        self.steps.append(Step(now_ms(), text))

    def own_producer(self, name: str) -> OwnTransactionalProducer:
        tid = f"{self.topic}-{name}"
        own = OwnTransactionalProducer(
            self.cluster.bootstrap_servers, tid, self.recorder(name), TIMEOUT_MS,
            epoch_bump=self.epoch_bump,
        )  # fmt: skip
        own.init()
        self.step(f"{name}: InitProducerId({tid}) -> producer {own.producer_id} epoch {own.epoch}")
        return own

    def wait_markers(self, own: OwnTransactionalProducer, commit: bool) -> None:
        """Until the coordinator has written the transaction's markers to every partition in
        it (its txn_committed / txn_aborted event): what a delayed message then lands after."""
        kind = "txn_committed" if commit else "txn_aborted"
        since = own.ended_ms

        def written() -> bool:
            return any(
                e.get("transactional_id") == own.tid for e in self.cluster.events(since, kind)
            )

        wait_until(written, timeout_s=CALL_TIMEOUT_S, what=f"{own.tid}'s {kind} event")
        self.step(f"coordinator: {own.transaction}'s markers written ({kind})")

    def unmodified_commits(self, transactions: int, value: str) -> None:
        """An unmodified confluent-kafka transactional producer commits `transactions`
        transactions, each writing one record to every partition of the topic."""
        recorder = self.recorder("confluent-producer")
        config = self.cluster.confluent_config()
        producer = recorder.producer(
            {**config, "transactional.id": f"{self.topic}-confluent", "acks": "all",
             "transaction.timeout.ms": TIMEOUT_MS}
        )  # fmt: skip
        producer.init_transactions(CALL_TIMEOUT_S)
        for n in range(transactions):
            producer.begin_transaction()
            for p in range(PARTITIONS):
                producer.produce(self.topic, f"{value}-{n}-p{p}".encode(), partition=p)
            producer.commit_transaction(CALL_TIMEOUT_S)
        producer.flush(CALL_TIMEOUT_S)
        self.step(f"confluent-kafka producer: committed {transactions} transactions")

    def close(self) -> None:
        for r in self._recorders:
            r.close()


def held_then_aborted(stage: Stage, own: OwnTransactionalProducer, value: bytes) -> Held:
    """`value`'s produce to partition 0 held on the way; the client gives up on it (timed out)
    and aborts its transaction; returned once the abort's markers are written."""
    txn = own.transaction
    held = own.prepare(stage.topic, 0, value)
    stage.step(f"delayed: {txn} sends {value!r} to {stage.topic}-0, held on the way (sequence "
               f"{held.sequence}, epoch {held.epoch})")  # fmt: skip
    own.give_up(held)
    own.end(commit=False)
    stage.step(f"delayed: gave up on {value!r} (timed out), aborted {txn} (epoch now {own.epoch})")
    stage.wait_markers(own, commit=False)
    return held


def hanging_transaction(stage: Stage) -> None:
    own = stage.own_producer("delayed")
    own.begin()
    own.add_partitions(stage.topic, [0])
    own.produce(stage.topic, 0, b"h-1")
    held = held_then_aborted(stage, own, b"h-2")
    stage.step(f"delayed: the held 'h-2' arrives at the leader: {own.deliver(held)}")
    stage.unmodified_commits(3, "after")
    own.close()


def delayed_produce_next_transaction(stage: Stage) -> None:
    own = stage.own_producer("delayed")
    own.begin()
    own.add_partitions(stage.topic, [0, 1])
    own.produce(stage.topic, 1, b"t1-p1")
    held = held_then_aborted(stage, own, b"t1-p0")
    second = own.begin()
    own.add_partitions(stage.topic, [0, 1])
    stage.step(f"delayed: {second} begins on partitions 0 and 1")
    stage.step(f"delayed: the held 't1-p0' arrives at the leader: {own.deliver(held)}")
    own.produce(stage.topic, 0, b"t2-p0")
    own.produce(stage.topic, 1, b"t2-p1")
    own.end(commit=True)
    stage.step(f"delayed: {second} committed")
    own.close()


@dataclass(frozen=True)
class DelayScenario:
    name: str
    description: str
    expect: tuple[str, ...]  # the anomaly kinds Kafka 2.6's protocol lets through
    steps: Callable[[Stage], None]
    watch_s: float  # the longest the reader polls on after the steps (it stops at the end)
    verification_closes: bool  # KIP-890 part 1 alone refuses the delayed message


SCENARIOS = {
    s.name: s
    for s in (
        DelayScenario(
            "hanging-transaction",
            "a transactional produce delayed past its transaction's abort opens a transaction "
            "nothing ends: the LSO stops and read_committed readers stall",
            ("stalled-consumer",),
            hanging_transaction,
            watch_s=TIMEOUT_MS / 1000 + 3,
            verification_closes=True,
        ),  # fmt: skip
        DelayScenario(
            "delayed-produce-next-transaction",
            "a produce of an aborted transaction, delayed, lands in the producer's next "
            "transaction and commits with it: an aborted read",
            ("aborted-read",),
            delayed_produce_next_transaction,
            watch_s=30.0,
            verification_closes=False,
        ),  # fmt: skip
    )
}


@dataclass(frozen=True)
class Defences:
    """KIP-890's two parts, each a broker setting (a cluster runs with them or without)."""

    verification: bool = False  # part 1: transaction.partition.verification.enable
    epoch_bump: bool = False  # part 2: transaction.version 2, EndTxn v5

    def settings(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.verification:
            out[VERIFY] = True
        if self.epoch_bump:
            out[TRANSACTION_VERSION] = 2
        return out

    def text(self) -> str:
        return (
            f"{VERIFY}: {'on' if self.verification else 'off'}; "
            f"{TRANSACTION_VERSION}: {2 if self.epoch_bump else 1}"
        )

    def closes(self, scenario: DelayScenario) -> bool:
        return self.epoch_bump or (self.verification and scenario.verification_closes)


@dataclass(frozen=True)
class DelayReport:
    scenario: DelayScenario
    defences: Defences
    result: CheckResult
    steps: tuple[Step, ...]
    leaders: tuple[LeaderView, ...] = ()  # each partition as its leader said at the end

    @property
    def found(self) -> list[str]:
        return sorted(self.result.kinds())

    @property
    def reproduced(self) -> bool:
        """Every anomaly the scenario is about was found."""
        return all(k in self.result.kinds() for k in self.scenario.expect)

    @property
    def as_expected(self) -> bool:
        """What Kafka's rules predict: nothing where the defences on close the scenario, its
        anomaly where they do not (Kafka 2.6's behaviour, or part 1 alone against a produce
        landing in the next transaction)."""
        return not self.found if self.defences.closes(self.scenario) else self.reproduced

    def verdict(self) -> str:
        found = ", ".join(self.found) or "nothing"
        if not self.scenario.expect and not self.defences.closes(self.scenario):
            return f"verdict: the checker found {found}"
        if self.defences.closes(self.scenario):
            return "verdict: defended: the checker finds nothing" if not self.found else (
                f"verdict: NOT defended ({found})")  # fmt: skip
        if not self.reproduced:
            return f"verdict: NOT reproduced ({found}): expected {', '.join(self.scenario.expect)}"
        if not self.defences.verification:
            return f"verdict: reproduced ({found}): Kafka 2.6's protocol lets it through"
        return (
            f"verdict: reproduced ({found}) with verification on, as predicted: the delayed "
            "message carries the epoch of the producer's next transaction, which has the "
            "partition; KIP-890 part 2 (an epoch bump per transaction, transaction.version 2) "
            "is what refuses it"
        )

    def text(self) -> str:
        head = [
            f"scenario {self.scenario.name}: {self.scenario.description}",
            self.defences.text(),
            "",
            "steps:",
            *(f"  {s}" for s in self.steps),
            "",
            self.result.text(),
            "",
        ]
        if self.leaders:
            head += [
                "at the end, as the leaders said:",
                *(f"  {v.text()}" for v in self.leaders),
                "",
            ]
        head.append(self.verdict())
        return "\n".join(head)


@dataclass
class Reader:
    """A read_committed confluent-kafka consumer of the stage's topic, recorded, from the
    beginning until `stop`; once the steps are done (`steps_done`) it says when it has read
    every partition to its end (`at_end`: its position at the high watermark, as a
    read_uncommitted consumer asks for it, which a hanging transaction's stuck LSO never lets
    it reach)."""

    stop: threading.Event = field(default_factory=threading.Event)
    steps_done: threading.Event = field(default_factory=threading.Event)
    at_end: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)


def read_committed(stage: Stage, reader: Reader) -> None:
    from confluent_kafka import Consumer

    recorder = stage.recorder("reader")
    try:
        consumer = recorder.consumer(
            {**stage.cluster.confluent_config(), "group.id": f"{stage.topic}-reader",
             "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
        )  # fmt: skip
        consumer.subscribe([stage.topic])
        watermarks = Consumer(
            {**stage.cluster.confluent_config(), "group.id": f"{stage.topic}-watermarks",
             "isolation.level": "read_uncommitted"}
        )  # fmt: skip
        while not reader.stop.is_set():
            got = consumer.consume(100, 0.2)
            if not got and reader.steps_done.is_set() and read_to_the_end(consumer, watermarks):
                reader.at_end.set()
        watermarks.close()
        consumer.close()
    except Exception as exc:  # noqa: BLE001 - reported by run()
        reader.errors.append(f"reader: {type(exc).__name__}: {exc}")


def run(
    scenario: DelayScenario, cluster: Cluster, folder: Path, defences: Defences = Defences()
) -> DelayReport:
    """Runs `scenario` on `cluster` (whose brokers run with `defences.settings()`) against a
    topic of its own; the history is kept in `folder`."""
    topic = f"{scenario.name}-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                         min_insync_replicas=2)  # fmt: skip
    stage = Stage(cluster, topic, folder, epoch_bump=defences.epoch_bump)
    since = now_ms()
    reader = Reader()
    thread = threading.Thread(target=read_committed, args=(stage, reader), daemon=True)
    thread.start()
    try:
        scenario.steps(stage)
        reader.steps_done.set()
        # Until the reader has read everything, or for at most watch_s: a reader stalled
        # behind a stuck LSO polls on for all of it, as a stall is a duration.
        reader.at_end.wait(scenario.watch_s)
        leaders = leaders_now(cluster, topic, PARTITIONS)
    finally:
        reader.stop.set()
        thread.join(CALL_TIMEOUT_S)
        stage.close()
    if reader.errors:
        raise RuntimeError("; ".join(reader.errors))
    history = load(sorted(folder.glob("*.jsonl")))
    timeline: list[Any] = sorted([*cluster.events(since), *stage.steps], key=lambda e: e.ts_ms)
    result = check(history, delivery=EXACTLY_ONCE, timeline=timeline,
                   transaction_timeout_ms=TIMEOUT_MS)  # fmt: skip
    return DelayReport(scenario, defences, result, tuple(stage.steps), leaders)
