"""The before/after table, pure: per figure the medians and ranges of tree A (the ref) and tree B
(the working tree), the ratio B/A of the medians, and a verdict that calls a difference noise
while the two trees' ranges overlap."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Better = Literal["lower", "higher"]


@dataclass(frozen=True)
class Figure:
    """One measured value of one run: `better` says which way is an improvement."""

    name: str
    value: float
    better: Better
    unit: str = ""


@dataclass(frozen=True)
class Row:
    name: str
    unit: str
    better: Better
    a: tuple[float, ...]
    b: tuple[float, ...]

    @property
    def a_median(self) -> float:
        return statistics.median(self.a)

    @property
    def b_median(self) -> float:
        return statistics.median(self.b)

    @property
    def ratio(self) -> float | None:
        """B/A of the medians; None when A's median is 0 (nothing to divide by)."""
        return None if self.a_median == 0 else self.b_median / self.a_median

    @property
    def verdict(self) -> str:
        """`noise` while the ranges overlap (or a tree has a single run: nothing says how far
        one run strays); otherwise `better` or `worse` by the figure's direction."""
        if len(self.a) < 2 or len(self.b) < 2:
            return "one run"
        if max(self.a) >= min(self.b) and max(self.b) >= min(self.a):
            return "noise"
        b_higher = self.b_median > self.a_median
        return "better" if b_higher == (self.better == "higher") else "worse"


def rows(
    runs_a: Sequence[Mapping[str, Figure]], runs_b: Sequence[Mapping[str, Figure]]
) -> list[Row]:
    """One row per figure both trees measured in every run, in the order first seen."""
    names: list[str] = []
    for run in [*runs_a, *runs_b]:
        names += [n for n in run if n not in names]
    out = []
    for name in names:
        if not all(name in r for r in [*runs_a, *runs_b]):
            continue
        first = runs_b[0][name] if runs_b else runs_a[0][name]
        out.append(
            Row(
                name, first.unit, first.better,
                tuple(r[name].value for r in runs_a), tuple(r[name].value for r in runs_b),
            )
        )  # fmt: skip
    return out


def missing(
    runs_a: Sequence[Mapping[str, Figure]], runs_b: Sequence[Mapping[str, Figure]]
) -> list[str]:
    """Figures some run lacks (a part that failed in one tree, or one tree measures more)."""
    every = {n for r in [*runs_a, *runs_b] for n in r}
    return sorted(n for n in every if not all(n in r for r in [*runs_a, *runs_b]))


def _num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _cell(values: Iterable[float], median: float, unit: str) -> str:
    values = list(values)
    spread = f" ({_num(min(values))}–{_num(max(values))})" if len(values) > 1 else ""
    return f"{_num(median)}{(' ' + unit) if unit else ''}{spread}"


def markdown(table: Sequence[Row], label_a: str, label_b: str) -> str:
    """The table as Markdown: medians with their (min–max) range, B/A and the verdict."""
    header = ["figure", f"A: {label_a}", f"B: {label_b}", "B/A", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in table:
        ratio = "–" if r.ratio is None else f"{r.ratio:.2f}"
        better = "↓" if r.better == "lower" else "↑"
        lines.append(
            f"| {r.name} {better} | {_cell(r.a, r.a_median, r.unit)} | "
            f"{_cell(r.b, r.b_median, r.unit)} | {ratio} | {r.verdict} |"
        )
    return "\n".join(lines)
