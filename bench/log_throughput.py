"""Broker hot-path throughput: validate-and-stamp, log append and log read, on real files.

    .venv/bin/python bench/log_throughput.py [--batch-kib 64] [--records-per-batch 100] [--mib 256]

Batches are built once (the client's work) and then appended as the leader does: CRC check,
offset and epoch stamping, file append; then read back sequentially as a follower would.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from broker.log.layout import open_log
from minibroker.core.batch_validation import validate_and_stamp
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-kib", type=int, default=64)
    parser.add_argument("--records-per-batch", type=int, default=100)
    parser.add_argument("--mib", type=int, default=256, help="total bytes to append")
    args = parser.parse_args()
    value = b"x" * max(1, args.batch_kib * 1024 // args.records_per_batch - 20)
    batch = build_batch(
        [NewRecord(None, value)] * args.records_per_batch, base_timestamp=int(time.time() * 1000)
    )
    count = args.mib * 1024 * 1024 // len(batch)
    total_mib = count * len(batch) / 2**20
    print(
        f"{count} batches of {len(batch)} bytes ({args.records_per_batch} records): "
        f"{total_mib:.0f} MiB"
    )

    t0 = time.perf_counter()
    for i in range(count):
        validate_and_stamp(batch, next_offset=i, partition_leader_epoch=0, max_batch_bytes=1 << 24)
    stamp_s = time.perf_counter() - t0
    print(
        f"validate_and_stamp : {total_mib / stamp_s:8.0f} MiB/s  {count / stamp_s:8.0f} batches/s"
    )

    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp), TopicPartition("bench", 0), segment_bytes=256 * 2**20)
        t0 = time.perf_counter()
        for _ in range(count):
            log.append_as_leader(batch, leader_epoch=0)
        log.flush()
        append_s = time.perf_counter() - t0
        print(
            f"append + flush     : {total_mib / append_s:8.0f} MiB/s  "
            f"{count / append_s:8.0f} batches/s"
        )

        t0 = time.perf_counter()
        offset, read_bytes = 0, 0
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20)
            read_bytes += len(data)
            offset += (len(data) // len(batch)) * args.records_per_batch
        read_s = time.perf_counter() - t0
        print(f"read (1 MiB reads) : {read_bytes / 2**20 / read_s:8.0f} MiB/s")


if __name__ == "__main__":
    main()
