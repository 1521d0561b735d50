"""The registry of named scenarios, in the order `minibroker scenario list` prints them."""

from __future__ import annotations

import difflib

import minibroker.scenarios.catalog_network as catalog_network
import minibroker.scenarios.catalog_operations as catalog_operations
import minibroker.scenarios.catalog_process as catalog_process
import minibroker.scenarios.catalog_special as catalog_special
import minibroker.scenarios.catalog_transactions as catalog_transactions
from minibroker.scenarios.scenario import Scenario

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        *catalog_process.SCENARIOS,
        *catalog_special.SCENARIOS,
        *catalog_network.SCENARIOS,
        *catalog_operations.SCENARIOS,
        *catalog_transactions.SCENARIOS,
    ]
}


class UnknownScenario(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def scenario_or_raise(name: str) -> Scenario:
    found = SCENARIOS.get(name)
    if found is None:
        close = difflib.get_close_matches(name, SCENARIOS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownScenario(
            f"no scenario named {name!r}{hint}; `minibroker scenario list` names them"
        )
    return found
