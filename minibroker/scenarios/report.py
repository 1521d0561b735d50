"""A run's verdict and report: PASS when no invariant is violated (expected, documented losses
aside) and every expectation of the scenario held; the timeline, the violations with their
evidence and the counts, as text or as one JSON document.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minibroker.scenarios.context import Check
from minibroker.scenarios.history import History
from minibroker.scenarios.invariants import INVARIANTS, Violation
from minibroker.scenarios.timeline import Timeline

SHOWN_PER_INVARIANT = 5


@dataclass
class Report:
    scenario: str
    description: str
    seed: int
    planted_bug: str | None
    cluster_dir: str
    duration_s: float
    history: History
    timeline: Timeline
    violations: list[Violation] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # steps that could not be carried out

    @property
    def failures(self) -> list[Violation]:
        return [v for v in self.violations if not v.expected]

    @property
    def expected_losses(self) -> list[Violation]:
        return [v for v in self.violations if v.expected]

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def passed(self) -> bool:
        return not self.failures and not self.failed_checks and not self.errors

    def violated(self) -> list[str]:
        """The names of the violated invariants, in INVARIANTS order."""
        names = {v.invariant for v in self.failures}
        return [n for n in INVARIANTS if n in names]

    def problems(self) -> list[str]:
        """What made the run fail, one line each (empty when it passed): the lines a clipped
        CI log must still show, so a failure's cause leads its message."""
        lines = [f"step failed: {e}" for e in self.errors]
        lines += [f"check FAIL {c.name}: {c.message}" for c in self.failed_checks]
        lines += [
            f"violation {v.invariant}: {v.message}" for v in self.failures[:SHOWN_PER_INVARIANT]
        ]
        if len(self.failures) > SHOWN_PER_INVARIANT:
            lines.append(f"... {len(self.failures) - SHOWN_PER_INVARIANT} more violation(s)")
        return lines

    def verdict(self) -> str:
        if self.passed:
            return "verdict: PASS"
        counts = Counter(v.invariant for v in self.failures)
        parts = [f"{name} x{counts[name]}" for name in self.violated()]
        if self.failed_checks:
            parts.append(f"{len(self.failed_checks)} scenario expectation(s) not met")
        if self.errors:
            parts.append(f"{len(self.errors)} step(s) failed")
        return f"verdict: FAIL ({'; '.join(parts)})"

    def render(self) -> str:
        lines = [
            f"scenario {self.scenario} (seed {self.seed}"
            + (f", planted bug {self.planted_bug}" if self.planted_bug else "")
            + f"): {self.description}",
            "",
            "timeline:",
            *(f"  {line}" for line in self.timeline.render()),
            "",
        ]
        s = self.history.summary()
        lines.append(
            f"records: {s['sent']} sent, {s['acked']} acked (acks=all), {s['failed']} failed"
            f"{_counts(s['errors'])}, {s['pending']} unanswered; {s['validated_records']} "
            "read back up to the HW"
        )
        lines.append(
            f"observed: {s['fetches']} consumer fetches, {s['hw_samples']} HW samples, "
            f"{s['zk_state_versions']} partition states, {s['zk_gaps']} ZooKeeper gap(s), "
            f"{self.timeline.routine_events} routine events not shown"
        )
        for c in self.checks:
            lines.append(f"check {'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.message}")
        for e in self.errors:
            lines.append(f"step failed: {e}")
        lines += _violation_lines("violation", self.failures)
        lines += _violation_lines("expected", self.expected_losses)
        lines.append(f"duration: {self.duration_s:.1f} s")
        lines.append(self.verdict())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "description": self.description,
            "seed": self.seed,
            "planted_bug": self.planted_bug,
            "cluster_dir": self.cluster_dir,
            "duration_s": round(self.duration_s, 3),
            "verdict": "PASS" if self.passed else "FAIL",
            "violated": self.violated(),
            "violations": [dataclasses.asdict(v) for v in self.violations],
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "errors": self.errors,
            "summary": self.history.summary(),
            "timeline": self.timeline.to_json(),
            "history": self.history.to_json(),
        }

    def write_json(self, path: Path) -> None:
        write_json(path, self.to_json())


def write_json(path: Path, doc: Any) -> None:
    """One report's (or a list of reports') JSON, any leftover value made JSON-able."""
    path.write_text(json.dumps(doc, indent=1, default=_jsonable) + "\n")


def _counts(errors: dict[str, int]) -> str:
    if not errors:
        return ""
    return " (" + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) + ")"


def _violation_lines(label: str, violations: list[Violation]) -> list[str]:
    """The first SHOWN_PER_INVARIANT of each invariant's violations; expected ones (they come
    by the hundred) as the first of each partition with a count."""
    lines = []
    by_name: dict[str, list[Violation]] = {}
    for v in violations:
        key = v.invariant
        if v.expected:
            key += f"/{v.evidence.get('partition', '')}"
        by_name.setdefault(key, []).append(v)
    for found in by_name.values():
        name = found[0].invariant
        shown = 1 if found[0].expected else SHOWN_PER_INVARIANT
        for v in found[:shown]:
            lines.append(f"{label} [{name}] {v.message}")
        if len(found) > shown:
            lines.append(f"{label} [{name}] ... and {len(found) - shown} more like it")
    return lines


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)
