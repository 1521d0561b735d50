"""The allocator tuning: applied on glibc, left to the user when their environment sets it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minibroker.runtime import malloc_tuning

PROBE = """
from minibroker.runtime.malloc_tuning import tune_malloc
print(tune_malloc())
"""


def run_probe(env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_tuning_applies_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in malloc_tuning.ENVIRONMENT_NAMES:
        monkeypatch.delenv(name, raising=False)
    # In a child process: the tuning is process-wide and this test process need not have it.
    assert run_probe({"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}) == "True"


@pytest.mark.parametrize("name", malloc_tuning.ENVIRONMENT_NAMES)
def test_a_users_own_malloc_setting_wins(name: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), name: "1048576"}
    assert run_probe(env) == "False"
