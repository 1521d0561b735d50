"""Runs the atheris fuzzer of the batch codec for a bounded number of inputs, from a corpus of
the hostile variants and good batches (one seed, printed; rerun with MINIBROKER_FUZZ_SEED).
MINIBROKER_FUZZ_RUNS sets how many (the suite's 50,000 take ~20 s; a longer soak:
`MINIBROKER_FUZZ_RUNS=2000000 .venv/bin/pytest tests/fuzz`)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from tests.hostile import batches as hb

RUNS = int(os.environ.get("MINIBROKER_FUZZ_RUNS", "50000"))
SEED = int(os.environ.get("MINIBROKER_FUZZ_SEED", random.randrange(1, 1 << 30)))


def test_the_fuzzer_finds_nothing_in_its_runs(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    seeds = [hb.good(1), hb.good(4), *(hb.compressed(c, 3) for c in (1, 2, 3, 4))]
    seeds += [v.make() for v in hb.VARIANTS if v.name not in ("gzip-bomb",)]
    for i, data in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(data)
    result = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.fuzz_batches", str(corpus),
         f"-runs={RUNS}", f"-seed={SEED}", "-max_len=4096", "-rss_limit_mb=2048",
         f"-artifact_prefix={tmp_path}/"],
        capture_output=True, text=True, timeout=600, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    tail = "\n".join(result.stderr.splitlines()[-40:])
    assert result.returncode == 0, f"fuzzer failed (MINIBROKER_FUZZ_SEED={SEED}):\n{tail}"
    assert f"Done {RUNS} runs" in result.stderr, tail
