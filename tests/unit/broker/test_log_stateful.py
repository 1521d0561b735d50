"""The log against a list of batches: appends, truncations, reopens, crashes and reads agree.

Segments are small (300 bytes) so rolls happen often; a crash loses exactly the batches
appended since the last flush, which the model tracks as a durable prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.log.log import Log
from broker.log.log_types import OffsetOutOfRange
from broker.log.store import MemorySegmentStore
from broker.replication.leader_epoch import EpochEntry
from minibroker.core import batch_validation, records
from minibroker.core.records import NewRecord

SEGMENT_BYTES = 300
INDEX_INTERVAL_BYTES = 100
MAX_BATCH_BYTES = 1 << 20


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes  # as stamped by the leader


class LogMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.store = MemorySegmentStore()
        self.log = self.open()
        self.batches: list[ModelBatch] = []
        self.log_start_offset = 0
        self.durable = 0  # how many of self.batches a crash would keep
        self.epoch = 0

    def open(self) -> Log:
        return Log(
            self.store, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL_BYTES
        )

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset

    @rule(
        values=st.lists(st.binary(max_size=40), min_size=1, max_size=3),
        new_epoch=st.booleans(),
    )
    def append_as_leader(self, values: list[bytes], new_epoch: bool) -> None:
        self.epoch += new_epoch
        data = records.build_batch([NewRecord(b"k", v) for v in values], base_timestamp=1000)
        info = self.log.append_as_leader(data, leader_epoch=self.epoch)
        stamped = batch_validation.validate_and_stamp(
            data,
            next_offset=self.next_offset,
            partition_leader_epoch=self.epoch,
            max_batch_bytes=MAX_BATCH_BYTES,
        )
        assert (info.first_offset, info.last_offset) == (stamped.first_offset, stamped.last_offset)
        self.batches.append(
            ModelBatch(stamped.first_offset, stamped.last_offset, self.epoch, stamped.data)
        )

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start_offset, self.next_offset), label="offset")
        self.log.truncate_to(offset)
        self.batches = [b for b in self.batches if b.last_offset < offset]
        self.durable = min(self.durable, len(self.batches))

    @rule(ahead=st.integers(0, 50))
    def truncate_fully_and_start_at(self, ahead: int) -> None:
        offset = self.next_offset + ahead
        self.log.truncate_fully_and_start_at(offset)
        self.batches = []
        self.log_start_offset = offset
        self.durable = 0

    @rule()
    def reopen(self) -> None:
        self.log = self.open()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.durable = len(self.batches)

    @rule()
    def crash_and_reopen(self) -> None:
        self.store.crash()
        self.batches = self.batches[: self.durable]
        self.log = self.open()

    @rule(data=st.data(), max_bytes=st.integers(0, 700), to_hw=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, to_hw: bool) -> None:
        offset = data.draw(st.integers(self.log_start_offset, self.next_offset), label="offset")
        boundaries = [b.base_offset for b in self.batches] + [self.next_offset]
        max_offset = data.draw(st.sampled_from(boundaries), label="max_offset") if to_hw else None
        got = self.log.read(offset, max_bytes, max_offset)
        assert got == self.expected_read(offset, max_bytes, max_offset)

    @precondition(lambda self: self.log_start_offset > 0)
    @rule()
    def read_below_the_log_start(self) -> None:
        try:
            self.log.read(self.log_start_offset - 1, 100)
        except OffsetOutOfRange:
            return
        raise AssertionError("a read below the log start must be out of range")

    @rule()
    def read_past_the_log_end(self) -> None:
        try:
            self.log.read(self.next_offset + 1, 100)
        except OffsetOutOfRange:
            return
        raise AssertionError("a read past the LEO must be out of range")

    def expected_read(self, offset: int, max_bytes: int, max_offset: int | None) -> bytes:
        limit = self.next_offset if max_offset is None else max_offset
        out: list[bytes] = []
        size = 0
        for b in self.batches:
            if b.last_offset < offset:
                continue
            if b.last_offset >= limit or (out and size + len(b.data) > max_bytes):
                break
            out.append(b.data)
            size += len(b.data)
            if size >= max_bytes:
                break
        return b"".join(out)

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.next_offset
        assert self.log.log_start_offset == self.log_start_offset

    @invariant()
    def batches_are_contiguous_and_as_appended(self) -> None:
        headers = self.log.batches()
        assert [(h.base_offset, h.last_offset) for h in headers] == [
            (b.base_offset, b.last_offset) for b in self.batches
        ]
        expected_next = self.log_start_offset
        for h in headers:
            assert h.base_offset == expected_next
            expected_next = h.next_offset

    @invariant()
    def epoch_cache_names_the_first_offset_of_each_epoch(self) -> None:
        expected: list[EpochEntry] = []
        for b in self.batches:
            if not expected or expected[-1].epoch != b.epoch:
                expected.append(EpochEntry(b.epoch, b.base_offset))
        assert list(self.log.epoch_cache.entries) == expected


LogMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
TestLog = LogMachine.TestCase
