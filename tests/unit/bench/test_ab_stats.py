"""`bench ab`'s table: medians, ranges, the ratio B/A and the verdict (bench/ab/stats.py)."""

from __future__ import annotations

import pytest

from bench.ab.stats import Better, Figure, Row, markdown, missing, rows


def run(**values: float) -> dict[str, Figure]:
    return {
        n: Figure(n, v, "higher" if n.endswith("rate") else "lower", "") for n, v in values.items()
    }


@pytest.mark.parametrize(
    ("a", "b", "better", "verdict"),
    [
        ((4.0, 4.2), (7.5, 8.1), "lower", "worse"),  # idle CPU up: worse
        ((7.5, 8.1), (4.0, 4.2), "lower", "better"),
        ((100.0, 110.0), (90.0, 95.0), "higher", "worse"),  # throughput down: worse
        ((4.0, 4.6), (4.5, 5.0), "lower", "noise"),  # ranges overlap
        ((4.0,), (8.0,), "lower", "one run"),  # one run says nothing of the spread
    ],
)
def test_verdict_follows_the_direction_and_calls_overlap_noise(
    a: tuple[float, ...], b: tuple[float, ...], better: Better, verdict: str
) -> None:
    assert Row("x", "", better, a, b).verdict == verdict


def test_ratio_is_b_over_a_of_the_medians() -> None:
    row = Row("cpu", "%", "lower", (4.0, 4.1, 9.0), (8.0, 8.2, 8.1))
    assert row.a_median == 4.1 and row.b_median == 8.1
    assert row.ratio == pytest.approx(8.1 / 4.1)
    assert Row("zero", "", "lower", (0.0, 0.0), (1.0, 1.0)).ratio is None


def test_rows_keep_only_figures_every_run_measured() -> None:
    runs_a = [run(cpu=4.0, rate=100.0), run(cpu=4.2, rate=101.0)]
    runs_b = [run(cpu=8.0, rate=99.0, extra=1.0), run(cpu=8.2, rate=98.0)]
    table = rows(runs_a, runs_b)
    assert [r.name for r in table] == ["cpu", "rate"]
    assert table[0].a == (4.0, 4.2) and table[0].b == (8.0, 8.2)
    assert missing(runs_a, runs_b) == ["extra"]


def test_markdown_shows_medians_ranges_ratio_and_verdict() -> None:
    text = markdown([Row("idle.broker_cpu", "%", "lower", (4.0, 4.2), (8.0, 8.4))], "A1", "B2")
    header, _rule, line = text.splitlines()
    assert header == "| figure | A: A1 | B: B2 | B/A | verdict |"
    assert line == "| idle.broker_cpu ↓ | 4.1 % (4–4.2) | 8.2 % (8–8.4) | 2.00 | worse |"
