"""`minibroker txn`: the scenarios listed, and a mistaken run answered in one line (the runs
themselves are tests/integration/test_txn_delay.py, on real clusters)."""

from __future__ import annotations

import pytest

from minibroker.cli.main import main
from minibroker.txn_delay.scenarios import SCENARIOS


def test_list_names_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["txn", "list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(SCENARIOS)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["txn", "run"], "give one scenario name or --all"),
        (["txn", "run", "hanging-transaction", "--all"], "give one scenario name or --all"),
        (["txn", "run", "nope"], "no scenario 'nope': one of hanging-transaction"),
    ],
)
def test_a_mistaken_run_gets_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
