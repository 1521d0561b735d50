"""Ports for processes that bind them later (minibroker/localcluster/ports.py): below the
kernel's ephemeral range, and never the same for two plans made at the same time."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from minibroker.localcluster import ports


@pytest.fixture
def reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "reserved"
    monkeypatch.setattr(ports, "RESERVATIONS", path)
    return path


def test_ports_are_free_distinct_and_below_the_ephemeral_range(reservations: Path) -> None:
    got = ports.free_ports(40)
    assert len(set(got)) == 40
    assert all(p < ports._ephemeral_low() for p in got)
    assert all(ports.port_free(p) for p in got)
    assert {int(line.split()[0]) for line in reservations.read_text().splitlines()} == set(got)


def _plan(n: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    out.put(ports.free_ports(n))


def test_plans_made_at_the_same_time_never_share_a_port(reservations: Path) -> None:
    ctx = multiprocessing.get_context("fork")  # the child keeps the patched RESERVATIONS
    out = ctx.Queue()
    procs = [ctx.Process(target=_plan, args=(50, out)) for _ in range(6)]
    for p in procs:
        p.start()
    plans = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    every = [port for plan in plans for port in plan]
    assert len(every) == len(set(every)) == 300


def test_a_reserved_port_waits_for_its_reservation_to_expire(
    reservations: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 1044)  # the range is 1024-1043
    window = [p for p in range(1024, 1044) if ports.port_free(p)]
    reserved, rest = window[:10], window[10:]
    now = time.time()
    reservations.write_text("".join(f"{p} {now + 60:.0f}\n" for p in reserved))
    assert sorted(ports.free_ports(len(rest))) == rest
    with pytest.raises(OSError, match="free ports"):
        ports.free_ports(1)  # all 20 reserved now
    reservations.write_text("".join(f"{p} {now - 1:.0f}\n" for p in window))
    assert sorted(ports.free_ports(len(window))) == window  # expired: handed out again
