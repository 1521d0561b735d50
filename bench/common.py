"""What every side-by-side benchmark shares: one result row, its table, latency percentiles,
free loopback ports and child processes that never outlive the benchmark.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from minibroker import localcluster

HOST = "127.0.0.1"


class MissingDependency(RuntimeError):
    """A program or package the benchmark needs is not installed; the message says how to get it."""


@dataclass(frozen=True)
class Result:
    """One measured case: `records` records of `record_bytes` bytes each in `seconds`.

    `messages` counts what went over the wire (a gRPC message or a NATS publish), each holding
    `records / messages` records. Latencies are per message, in milliseconds; None where the
    case cannot measure them (a client stream acknowledges only at its end).
    """

    system: str
    mode: str
    record_bytes: int
    records_per_message: int
    messages: int
    seconds: float
    p50_ms: float | None
    p99_ms: float | None
    p999_ms: float | None = None
    load: str = "peak"
    cpu_s: float | None = None  # CPU time of every process involved (client and servers)
    fetches_per_request: float | None = None  # follower Fetch RPCs per Produce, all brokers
    # Seconds from the first send until every follower held every record (closed loops of a
    # replicated topic): with acks=1 the leader can acknowledge faster than its followers copy.
    replicated_s: float | None = None

    @property
    def records(self) -> int:
        return self.messages * self.records_per_message

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.records * self.record_bytes / self.seconds

    @property
    def replicated_per_s(self) -> float | None:
        """Records per second the cluster sustains replicated: `records_per_s` over the time
        until the followers had them all."""
        return None if self.replicated_s is None else self.records / self.replicated_s

    @property
    def mb_per_s(self) -> float:
        return self.bytes_per_s / 1e6

    @property
    def cpu_ms_per_mb(self) -> float | None:
        """CPU milliseconds, all processes together, per MB of records moved."""
        mb = self.records * self.record_bytes / 1e6
        return None if self.cpu_s is None or not mb else self.cpu_s * 1000 / mb


def percentiles(latencies_ms: list[float]) -> tuple[float | None, float | None, float | None]:
    """p50, p99 and p99.9 of a list of latencies; Nones when empty. A tail percentile needs
    enough samples: with fewer than 100 (1000 for p99.9) it is the maximum."""
    if not latencies_ms:
        return None, None, None
    ordered = sorted(latencies_ms)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return statistics.median(ordered), at(0.99), at(0.999)


def format_header() -> str:
    return (
        f"{'system':<10} {'mode':<18} {'record':>6} {'batch':>6} {'records/s':>12} {'MB/s':>8} "
        f"{'load':>5} {'p50 ms':>9} {'p99 ms':>9} {'p999 ms':>9} {'replicated/s':>13}"
    )


def format_row(r: Result) -> str:
    def ms(value: float | None) -> str:
        return f"{value:>9.2f}" if value is not None else f"{'-':>9}"

    return (
        f"{r.system:<10} {r.mode:<18} {r.record_bytes:>6} {r.records_per_message:>6} "
        f"{r.records_per_s:>12,.0f} {r.mb_per_s:>8.1f} {r.load:>5} {ms(r.p50_ms)} "
        f"{ms(r.p99_ms)} {ms(r.p999_ms)} "
        + (f"{r.replicated_per_s:>13,.0f}" if r.replicated_per_s is not None else f"{'-':>13}")
    )


def format_table(results: Iterable[Result]) -> str:
    return "\n".join([format_header(), *(format_row(r) for r in results)])


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far, in seconds (/proc/<pid>/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    """Resident set size in MB (VmRSS of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class CpuMeter:
    """CPU seconds used by `pids` between `start()` and `stop()` (processes that exit in between
    count up to their last reading)."""

    def __init__(self, pids: Iterable[int]) -> None:
        self.pids = list(pids)
        self._before: dict[int, float] = {}

    def _read(self) -> dict[int, float]:
        out = {}
        for pid in self.pids:
            try:
                out[pid] = cpu_seconds(pid)
            except (OSError, IndexError, ValueError):
                continue
        return out

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> float:
        after = self._read()
        return sum(after[pid] - self._before[pid] for pid in after if pid in self._before)


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports free right now (the local cluster's own way)."""
    return localcluster.free_ports(count)


def spawn(args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
    """Start a child in its own process group (the terminal's Ctrl-C reaches the benchmark
    only, whose clean-up then stops the child) that gets SIGTERM if the benchmark dies outright
    (Linux's parent-death signal, set by util-linux's `setpriv`, which then execs the program:
    same PID). No `preexec_fn`: Python code between fork and exec can hang in a child forked
    while gRPC's threads run, as a NATS server start once did after the minibroker cases."""
    setpriv = shutil.which("setpriv")
    command = [setpriv, "--pdeathsig", "TERM", "--", *args] if setpriv else args
    return subprocess.Popen(command, process_group=0, **kwargs)  # type: ignore[call-overload, no-any-return]


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM the child by its PID, SIGKILL it if it lingers, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Section:
    """One part of BENCHMARKS.md, produced by one benchmark module's `measure(...)`.

    `markdown` is the body (tables in Markdown, one or two sentences on what was measured);
    `figures` holds the named values the goals table reads (e.g. "failover.demo.total_s"),
    so `python -m bench all` can judge every goal from the same run.
    """

    title: str
    markdown: str
    figures: dict[str, float]


def md_table(header: list[str], rows: Iterable[Iterable[object]]) -> str:
    """A Markdown table; floats keep the caller's formatting (pass strings for that)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
