"""Turning one run's measurements into BENCHMARKS.md: the machine, the throughput tables, the
ratios, the goals judged against the same run's figures, and the account of what was optimised
(`bench/account.md`, written by hand and included as it is), then the figures measured
separately (`bench/appendix.md`).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.common import Result, Section, md_table

ACCOUNT = Path(__file__).with_name("account.md")
APPENDIX = Path(__file__).with_name("appendix.md")


def _first_line(path: str, prefix: str) -> str | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip() if ":" in line else line.strip()
    except OSError:
        return None
    return None


def _package_version(name: str) -> str:
    if shutil.which("dpkg-query") is None:
        return "?"
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "not installed"


def machine() -> str:
    """One paragraph: cores, memory, CPU, OS and the versions that matter."""
    mem_kib = int((_first_line("/proc/meminfo", "MemTotal") or "0 kB").split()[0])
    os_name = "?"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({_first_line('/proc/cpuinfo', 'model name') or '?'}), "
        f"{mem_kib / 2**20:.0f} GiB memory, {os_name}, Linux {platform.release()}, "
        f"Python {platform.python_version()}, grpcio {grpc.__version__}, "
        f"ZooKeeper {_package_version('zookeeper')}, nats-server {_package_version('nats-server')}"
    )


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _cpu(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _cores(r: Result) -> str:
    """CPU time of every process involved over the run's wall time, the followers' catching
    up included where measured (2.0 = both cores busy)."""
    return "–" if r.cpu_s is None else f"{r.cpu_s / (r.replicated_s or r.seconds):.2f}"


def _replicated(r: Result) -> str:
    return "–" if r.replicated_per_s is None else f"{r.replicated_per_s:,.0f}"


def results_table(results: Sequence[Result]) -> str:
    return md_table(
        ["system", "mode", "record B", "records/msg", "load", "records/s", "replicated/s", "MB/s",
         "p50 ms", "p99 ms", "p99.9 ms", "CPU ms/MB", "CPU cores", "fetches/produce"],
        (
            [r.system, r.mode, r.record_bytes, r.records_per_message, r.load,
             f"{r.records_per_s:,.0f}", _replicated(r), f"{r.mb_per_s:.1f}", _ms(r.p50_ms),
             _ms(r.p99_ms),
             _ms(r.p999_ms), _cpu(r.cpu_ms_per_mb), _cores(r), _cpu(r.fetches_per_request)]
            for r in results
        ),
    )  # fmt: skip


def _find(results: Sequence[Result], mode: str, size: int, batch: int, load: str) -> Result | None:
    for r in results:
        if (r.mode, r.record_bytes, r.records_per_message, r.load) == (mode, size, batch, load):
            return r
    return None


@dataclass(frozen=True)
class Ratio:
    label: str
    numerator: float
    denominator: float
    cpu_per_mb: tuple[float | None, float | None] = (None, None)  # (numerator's, denominator's)

    @property
    def value(self) -> float:
        return self.numerator / self.denominator if self.denominator else float("nan")


def raw_ratios(minibroker: Sequence[Result], raw: Sequence[Result]) -> list[tuple[Result, Ratio]]:
    """minibroker acks=all pre-built bytes/s at peak ÷ raw unary bytes/s, same size and batch."""
    out = []
    for r in minibroker:
        if r.mode != "pre-built acks=all" or r.load != "peak":
            continue
        base = next(
            (x for x in raw if x.mode.startswith("unary") and
             (x.record_bytes, x.records_per_message) == (r.record_bytes, r.records_per_message)),
            None,
        )  # fmt: skip
        if base is not None:
            label = f"{r.record_bytes} B × {r.records_per_message}"
            cpu = (r.cpu_ms_per_mb, base.cpu_ms_per_mb)
            out.append((r, Ratio(label, r.bytes_per_s, base.bytes_per_s, cpu)))
    return out


def nats_ratios(minibroker: Sequence[Result], nats: Sequence[Result]) -> list[Ratio]:
    """minibroker acks=all records/s ÷ NATS R3 records/s at the same record size: one-record
    Produce requests (pre-built, 8 in flight per leader) against synchronous publish, the
    Producer (which batches) against asynchronous publish with 256 acks pending."""
    out = []
    for n in nats:
        pairs = (
            [("pre-built acks=all", 1)] if "async" not in n.mode else
            [("client defaults acks=all", 1), ("client batch 256K acks=all", 1)]
        )  # fmt: skip
        for mode, batch in pairs:
            m = _find(minibroker, mode, n.record_bytes, batch, "peak")
            if m is not None:
                label = f"{mode} ÷ NATS {n.mode}, {n.record_bytes} B"
                out.append(Ratio(label, m.records_per_s, n.records_per_s))
    return out


@dataclass(frozen=True)
class Goal:
    name: str
    target: str
    measured: str
    met: bool | None  # None: no bound, only reported

    @property
    def verdict(self) -> str:
        return {True: "met", False: "**missed**", None: "reported"}[self.met]


def goals_table(goals: Sequence[Goal]) -> str:
    return md_table(
        ["goal", "target", "measured (this run)", "verdict"],
        ([g.name, g.target, g.measured, g.verdict] for g in goals),
    )


def render(
    *,
    command: str,
    date: str,
    duration_s: float,
    sections: Sequence[Section],
    goals: Sequence[Goal],
) -> str:
    parts = [
        "# Benchmarks",
        "",
        f"Regenerated by `{command}` on {date} in {duration_s / 60:.1f} min, every figure "
        "from that one run. Tests never assert these numbers.",
        "",
        f"**Machine:** {machine()}. Everything — clients, brokers, ZooKeeper, the controller, "
        "the peers — shares these cores, so absolute figures drift from run to run; the "
        "ratios and bounds below are what the goals are about.",
        "",
        "## Goals",
        "",
        goals_table(goals),
        "",
    ]
    for s in sections:
        parts += [f"## {s.title}", "", s.markdown.strip(), ""]
    for extra in (ACCOUNT, APPENDIX):
        if extra.exists():
            parts += [extra.read_text().strip(), ""]
    return "\n".join(parts)
