"""The example application's suite (examples/orders) as a user runs it (issue 39 §5): in a
fresh virtualenv holding only minibroker (with its `testing` extra: pytest and confluent-kafka)
installed from a copy of this repository's files, from a directory outside the repository,
through the pytest plugin the package registers. Every test of it must pass, the one that
catches the commit-first variant included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def source_files() -> list[str]:
    """The repository's files as a clone has them (tracked, and new ones not ignored)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [f for f in out.stdout.splitlines() if (REPO / f).is_file()]


def run(cmd: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_example_suite_passes_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    source = tmp_path / "minibroker-src"
    for f in source_files():
        (source / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, source / f)
    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], tmp_path, 120)
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    installed = run([python, "-m", "pip", "install", "-q", f"{source}[testing]"], tmp_path, 900)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shutil.rmtree(source)  # what runs is what pip installed, not these files

    app = tmp_path / "orders"
    shutil.copytree(REPO / "examples" / "orders", app)
    suite = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--minibroker-artifacts", str(tmp_path / "artifacts"), "tests"],
        app, 1200,
    )  # fmt: skip
    said = [line for line in suite.stdout.splitlines() if line.startswith(("E ", "FAILED"))]
    summary = "\n".join(said[:150]) + "\n" + suite.stdout[-300:] + suite.stderr[-2000:]
    for report in sorted((tmp_path / "artifacts").glob("*.txt")):  # the plugin's, on a failure
        summary += f"\n---- {report.name} (the cluster then) ----\n{report.read_text()[-8000:]}"
    assert suite.returncode == 0, summary
    assert "7 passed" in suite.stdout, summary
