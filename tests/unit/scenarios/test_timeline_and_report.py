"""The timeline (relative times, routine events left out, repeats folded) and the report's
verdict line."""

from __future__ import annotations

import json
from pathlib import Path

from minibroker.scenarios.context import Check
from minibroker.scenarios.invariants import Violation
from minibroker.scenarios.report import Report
from minibroker.scenarios.timeline import Timeline
from tests.unit.scenarios.histories import healthy


def test_the_timeline_is_relative_and_leaves_routine_events_out() -> None:
    t = Timeline(start_ms=10_000)
    t.add("fault", "broker-1", "kill", "kill broker-1", ts_ms=12_250)
    t.event({"ts": 10_500, "proc": "broker-2", "event": "isr_shrink", "tp": "t-0"})
    t.event({"ts": 10_600, "proc": "broker-2", "event": "hw_advanced", "cause": "append"})
    t.event({"ts": 9_000, "proc": "broker-2", "event": "broker_started"})  # before the run
    lines = t.render()
    assert lines[0].startswith("  +0.500s  event broker-2")
    assert "isr_shrink" in lines[0] and "tp=t-0" in lines[0]
    assert lines[1].startswith("  +2.250s  fault broker-1")
    assert t.routine_events == 2


def test_repeats_are_folded_into_one_line() -> None:
    t = Timeline(start_ms=0)
    for ts in (100, 300, 500, 9_000):
        t.event({"ts": ts, "proc": "broker-3", "event": "follower_fetch_failed", "leader": 1})
    lines = t.render()
    assert len(lines) == 2
    assert lines[0].endswith("(x3 until +0.500s)")


def test_events_missed_by_the_streams_are_added_once() -> None:
    t = Timeline(start_ms=0)
    t.event({"ts": 100, "proc": "broker-1", "event": "isr_shrink"})
    added = t.add_missed(
        [
            {"ts": 100, "proc": "broker-1", "event": "isr_shrink"},
            {"ts": 200, "proc": "broker-1", "event": "broker_stopping"},
            {"ts": 300, "proc": "broker-1", "event": "request_sent"},
        ]
    )
    assert added == 1 and len(t.entries) == 2


def _report(
    violations: list[Violation] | None = None,
    checks: list[Check] | None = None,
    errors: list[str] | None = None,
) -> Report:
    return Report(
        "s", "about", 3, None, "/tmp/x", 1.5, healthy(), Timeline(start_ms=0),
        violations or [], checks or [], errors or [],
    )  # fmt: skip


def test_the_verdict_names_the_violated_invariants() -> None:
    assert _report().verdict() == "verdict: PASS"
    lost = Violation("acked-records-present", "lost")
    expected = Violation("acked-records-present", "unclean", expected=True)
    r = _report(violations=[lost, lost, expected, Violation("no-read-past-hw", "x")])
    assert r.verdict() == "verdict: FAIL (acked-records-present x2; no-read-past-hw x1)"
    assert _report(violations=[expected]).passed
    r = _report(checks=[Check(0, "error 19", False, "got NONE")], errors=["timed out"])
    assert r.verdict() == "verdict: FAIL (1 scenario expectation(s) not met; 1 step(s) failed)"
    text = r.render()
    assert "check FAIL  error 19: got NONE" in text and text.endswith(r.verdict())


def test_the_json_report_holds_everything(tmp_path: Path) -> None:
    r = _report(violations=[Violation("leader-in-isr", "x", {"sample": healthy().hw_samples[0]})])
    path = tmp_path / "r.json"
    r.write_json(path)
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "FAIL" and doc["violated"] == ["leader-in-isr"]
    assert doc["history"]["final"]["high_watermark"] == {"0": 4}
    assert doc["violations"][0]["evidence"]["sample"]["broker"] == 1
