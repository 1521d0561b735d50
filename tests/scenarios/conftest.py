"""Scenario tests run real clusters: one fresh process-mode cluster per scenario, in the test's
own dir, torn down by the runner whatever happens."""

from __future__ import annotations

import inspect

from minibroker import localcluster


def fault_proxy_available() -> bool:
    """Whether this build's process-mode cluster can put the fault proxy on its links."""
    return "proxy" in inspect.signature(localcluster.up).parameters
