"""Coverage-guided fuzzing (atheris, libFuzzer) of the batch decoder and validator.

Each input is taken as a Produce's records field. Properties: nothing but RecordError ever
escapes; the C record walk and its Python reference agree on every batch body; whatever the
leader's validation accepts decodes to exactly its record count at consecutive offsets, and the
leader's stamping keeps it so; what a follower's accepts decodes to its record count at
increasing offsets inside the batch (consecutive unless it is a compacted batch).

    python -m tests.fuzz.fuzz_batches CORPUS_DIR -runs=20000 -seed=1   # tests/fuzz/test_fuzz.py
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from minibroker.core import batch_validation, record_walk, records
    from minibroker.core.records import HEADER_SIZE, RecordError

MAX_BATCH_BYTES = 1 << 20


def check_one(data: bytes) -> None:
    try:
        headers = list(records.iter_batches(data))
    except RecordError:
        headers = []
    for h in headers:
        body = memoryview(data)[h.position + HEADER_SIZE : h.position + h.size]
        native = record_walk.check_records(body, h.record_count)
        reference = record_walk.check_records_py(body, h.record_count)
        assert native == reference, (data.hex(), native, reference)
    try:
        accepted = batch_validation.validate_from_leader(data, max_batch_bytes=MAX_BATCH_BYTES)
    except RecordError:
        accepted = []
    for h in accepted:
        offsets = [r.offset for r in records.decode_batch(data, h)]
        if h.record_count == h.last_offset_delta + 1:
            assert offsets == list(range(h.base_offset, h.next_offset))
        else:  # a compacted batch (a follower takes a cleaned leader's): increasing, inside it
            assert len(offsets) == h.record_count
            assert offsets == sorted(set(offsets))
            assert all(h.base_offset <= o < h.next_offset for o in offsets)
    try:
        stamped = batch_validation.validate_and_stamp(
            data, next_offset=1000, partition_leader_epoch=3, max_batch_bytes=MAX_BATCH_BYTES
        )
    except RecordError:
        return
    offsets = [r.offset for r in records.decode_records(stamped.data)]
    assert offsets == list(range(1000, stamped.last_offset + 1))


def main() -> None:
    atheris.Setup(sys.argv, check_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
