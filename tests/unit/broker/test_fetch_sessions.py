"""Incremental fetch sessions (KIP-227) as rules: the leader's session cache and the follower's
session builder, driven against each other as a follower and its leader would."""

from __future__ import annotations

from broker.fetch.session_builder import FetchSessionBuilder, PartitionFetchState
from broker.fetch.session_cache import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INT32_MAX,
    FetchContext,
    FetchSessionCache,
    next_epoch,
)
from broker.types import FetchPartitionRequest, FetchPartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

TPS = [TopicPartition("t", p) for p in range(1000)]
FOLLOWER = 2


def requests(send: dict[TopicPartition, PartitionFetchState]) -> list[FetchPartitionRequest]:
    return [
        FetchPartitionRequest(tp, offset, 1 << 20, epoch, log_start)
        for tp, (offset, log_start, epoch) in send.items()
    ]


def ask(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    *,
    replica_id: int = FOLLOWER,
    partitions: list[FetchPartitionRequest] | None = None,
    forgotten: list[TopicPartition] | None = None,
) -> FetchContext | ErrorCode:
    return cache.context(
        session_id=session_id,
        epoch=epoch,
        replica_id=replica_id,
        partitions=partitions or [],
        forgotten=forgotten or [],
        now_ms=0,
    )


class Pair:
    """A follower's builder and a leader's cache; `leos` is the leader's log of each partition,
    `hws` its HW."""

    def __init__(self, cache: FetchSessionCache | None = None, replica: int = FOLLOWER) -> None:
        self.cache = cache if cache is not None else FetchSessionCache(seed=1)
        self.replica = replica
        self.builder = FetchSessionBuilder()
        self.leos = dict.fromkeys(TPS, 0)
        self.hws = dict.fromkeys(TPS, 0)
        self.fetch_offsets = dict.fromkeys(TPS, 0)
        self.named: list[int] = []  # partitions named per request
        self.moved: set[TopicPartition] = set()

    def round(self) -> dict[TopicPartition, FetchPartitionResult]:
        wanted = {tp: (self.fetch_offsets[tp], 0, 0) for tp in TPS}
        # What a fetcher passes: every ready partition, and those whose offset moved.
        plan = self.builder.plan(wanted.keys(), wanted.__getitem__, set(self.moved))
        self.moved.clear()
        self.named.append(len(plan.send))
        ctx = self.cache.context(session_id=plan.session_id, epoch=plan.epoch,
                                 replica_id=self.replica, partitions=requests(plan.send),
                                 forgotten=plan.forgotten, now_ms=0)  # fmt: skip
        if isinstance(ctx, ErrorCode):
            assert not self.builder.on_response(ctx, 0)
            return {}
        answered = dict(ctx.response_partitions(self.leader_reads(ctx)))
        assert self.builder.on_response(ErrorCode.NONE, ctx.session_id)
        for tp, r in answered.items():  # the follower appends what came
            if r.records:
                self.fetch_offsets[tp] += len(r.records)
                self.moved.add(tp)
        return answered

    def leader_reads(self, ctx: FetchContext) -> dict[TopicPartition, FetchPartitionResult]:
        out = {}
        for req in ctx.requests:
            new = self.leos[req.tp] - req.fetch_offset  # one byte per record, for the test
            out[req.tp] = FetchPartitionResult(ErrorCode.NONE, self.hws[req.tp], 0, b"x" * new)
        return out


def test_an_idle_session_names_nothing_and_answers_nothing() -> None:
    pair = Pair()
    first = pair.round()
    assert len(first) == len(TPS) and pair.named == [len(TPS)]  # full: opens the session
    for _ in range(5):
        assert pair.round() == {}
    assert pair.named[1:] == [0] * 5
    assert pair.builder.full_fetches == 1


def test_only_partitions_with_news_are_answered_and_named_next() -> None:
    pair = Pair()
    pair.round()
    pair.leos[TPS[3]] = 5  # records appended on the leader
    pair.hws[TPS[9]] = 0
    pair.hws[TPS[7]] = 4  # the HW moved: the follower must learn it
    answered = pair.round()
    assert set(answered) == {TPS[3], TPS[7]}
    assert answered[TPS[3]].records == b"xxxxx" and answered[TPS[7]].high_watermark == 4
    assert pair.round() == {}  # the HW is not sent twice
    # The follower's fetch offset of TPS[3] moved: that is the only partition it names.
    assert pair.named[-1] == 1


def test_the_leader_keeps_the_fetch_offset_of_partitions_not_named() -> None:
    pair = Pair()
    pair.fetch_offsets[TPS[0]] = 2
    pair.leos[TPS[0]] = 2
    pair.round()
    ctx = ask(pair.cache, pair.builder.session_id, pair.builder.epoch, forgotten=[TPS[1]])
    assert isinstance(ctx, FetchContext) and ctx.incremental
    by_tp = {r.tp: r for r in ctx.requests}
    assert by_tp[TPS[0]].fetch_offset == 2  # counted as fetched at 2 (LEO, last caught up)
    assert TPS[1] not in by_tp and len(by_tp) == len(TPS) - 1


def test_a_wrong_epoch_or_unknown_session_is_an_error_and_the_follower_starts_over() -> None:
    pair = Pair()
    pair.round()
    wrong = ask(pair.cache, pair.builder.session_id, pair.builder.epoch + 5)
    assert wrong is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = ask(pair.cache, 12345, 1)
    assert unknown is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    other = ask(pair.cache, pair.builder.session_id, pair.builder.epoch, replica_id=3)
    assert other is ErrorCode.FETCH_SESSION_ID_NOT_FOUND  # not this replica's session
    pair.builder.on_failure()  # e.g. the request timed out: start over
    pair.round()
    assert pair.named[-1] == len(TPS) and pair.builder.full_fetches == 2
    assert pair.round() == {}


def test_the_cache_evicts_the_least_recently_used_session() -> None:
    cache = FetchSessionCache(capacity=2, seed=3)
    pairs = [Pair(cache, replica=b) for b in (2, 3, 4)]
    pairs[0].round()
    pairs[1].round()
    pairs[0].round()  # session 0 used again: session 1 is now the oldest
    pairs[2].round()
    assert len(cache) == 2
    pairs[1].round()  # its session is gone: FETCH_SESSION_ID_NOT_FOUND, then a full fetch
    pairs[1].round()
    assert pairs[1].builder.full_fetches == 2


def test_requests_without_a_session_epoch_or_with_no_slots_are_full_and_sessionless() -> None:
    reqs = requests({TPS[0]: (0, 0, 0)})
    ctx = ask(FetchSessionCache(), 0, FINAL_EPOCH, replica_id=-1, partitions=reqs)
    assert isinstance(ctx, FetchContext) and ctx.session_id == 0 and not ctx.incremental
    none = FetchSessionCache(capacity=0)
    ctx = ask(none, 0, INITIAL_EPOCH, partitions=reqs)
    assert isinstance(ctx, FetchContext) and ctx.session_id == 0 and len(none) == 0


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(7) == 8
    assert next_epoch(INT32_MAX) == 1


def test_a_partition_left_out_for_a_while_is_forgotten_then_named_again() -> None:
    pair = Pair()
    pair.round()
    states = {tp: (0, 0, 0) for tp in TPS}
    backing_off = states.keys() - {TPS[4]}
    plan = pair.builder.plan(backing_off, states.__getitem__, set())
    assert plan.send == {} and plan.forgotten == [TPS[4]]
    assert pair.builder.on_response(ErrorCode.NONE, pair.builder.session_id)
    plan = pair.builder.plan(states.keys(), states.__getitem__, set())
    assert plan.send == {TPS[4]: (0, 0, 0)} and plan.forgotten == []


def test_a_followers_new_session_replaces_its_old_one() -> None:
    cache = FetchSessionCache(seed=5)
    first, second = Pair(cache), Pair(cache)  # the same follower (replica 2), fetcher recreated
    first.round()
    second.round()
    assert len(cache) == 1
    assert first.round() == {}  # FETCH_SESSION_ID_NOT_FOUND: its holder starts over
    first.round()
    assert first.builder.full_fetches == 2 and len(cache) == 1
    consumers = [ask(cache, 0, INITIAL_EPOCH, replica_id=-1) for _ in range(3)]
    assert all(isinstance(c, FetchContext) for c in consumers)
    assert len(cache) == 4  # consumers' sessions are not per broker: all kept
