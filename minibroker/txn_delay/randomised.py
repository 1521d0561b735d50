"""A randomised run (issue 41 §2.3): one transactional producer of our own writes transactions
of two or three records over the topic's partitions; each produce is held, with some
probability, and delivered at a random later moment (during one of the next transactions), as
a link with random delays would; a transaction whose produce was held is aborted (the client
gave up on it, as on a timed-out request), as is one whose produce was refused; the rest
commit, every fourth aborted on purpose. Halfway, the broker coordinating the producer's
transactional id is SIGKILLed and started again (a coordinator failover). A read_committed
reader records what it gets; the checker says what it finds. With KIP-890 part 2 on
(`--epoch-bump`) it should find nothing.

    minibroker txn random --seed 7 --transactions 60 [--verification] [--epoch-bump]
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path

from minibroker.testing import Cluster, coordinator_of
from minibroker.txn_delay.producer import Held, OwnTransactionalProducer
from minibroker.txn_delay.scenarios import (
    PARTITIONS,
    TIMEOUT_MS,
    Defences,
    DelayReport,
    DelayScenario,
    Stage,
    run,
)
from minibroker.txn_delay.wire import WireError

HOLD_PROBABILITY = 0.2
LATER = (1, 1, 2, 3)  # how many transactions later a held produce arrives


@dataclass
class _Pending:
    held: Held
    due: int  # delivered once this transaction has begun


def _deliver(stage: Stage, own: OwnTransactionalProducer, held: Held, when: str) -> str:
    try:
        outcome = own.deliver(held)
    except (OSError, WireError) as exc:  # its leader died meanwhile: never answered
        outcome = f"lost ({exc})"
    stage.step(f"random: {held.send.value!r} arrives {when}: {outcome}")
    return outcome


def _end(stage: Stage, own: OwnTransactionalProducer, name: str, commit: bool) -> None:
    try:
        own.end(commit=commit)
    except WireError as exc:
        stage.step(f"random: {name} did not end: {exc}")


def randomised(stage: Stage, seed: int, transactions: int) -> None:
    rng = random.Random(seed)
    own = stage.own_producer("random")
    pending: list[_Pending] = []
    for n in range(transactions):
        if n == transactions // 2:
            action = stage.cluster.kill(coordinator_of(transactional_id=own.tid))
            stage.step(f"failover: killed {action.node}, the coordinator of {own.tid}")
            stage.cluster.start(action.node)
            stage.step(f"failover: {action.node} started again")
        name = own.begin()
        try:
            own.add_partitions(stage.topic, list(range(PARTITIONS)))
        except WireError as exc:
            stage.step(f"random: {name} could not begin: {exc}")
            continue
        for p in [p for p in pending if p.due <= n]:
            pending.remove(p)
            _deliver(stage, own, p.held, f"during {name}")
        gave_up = False
        for k in range(rng.choice((2, 3))):
            value = f"r{n}-w{k}".encode()
            held = own.prepare(stage.topic, rng.randrange(PARTITIONS), value)
            if rng.random() < HOLD_PROBABILITY:
                own.give_up(held)
                gave_up = True
                pending.append(_Pending(held, n + rng.choice(LATER)))
                stage.step(f"random: {name} holds {value!r} (sequence {held.sequence})")
            elif _deliver(stage, own, held, "at once") != "NONE":
                gave_up = True  # refused or lost: the client aborts what it cannot complete
        _end(stage, own, name, commit=not gave_up and (n + 1) % 4 != 0)
    for p in pending:
        _deliver(stage, own, p.held, "after the last transaction")
    own.close()


def run_randomised(
    cluster: Cluster, folder: Path, defences: Defences, seed: int = 0, transactions: int = 40
) -> DelayReport:
    """The randomised run on `cluster` (whose brokers run with `defences.settings()`)."""
    scenario = DelayScenario(
        "randomised",
        f"{transactions} transactions, produces held (p={HOLD_PROBABILITY}) and delivered 1-3 "
        f"transactions later, the coordinator killed halfway (seed {seed})",
        (),
        functools.partial(randomised, seed=seed, transactions=transactions),
        watch_s=TIMEOUT_MS / 1000 + 3,
        verification_closes=False,
    )
    return run(scenario, cluster, folder, defences)
