"""The dashboard's fault buttons, through the same chaos interface as `minibroker cluster ...`:
a node action (kill, stop, pause, resume, start, restart), `isolate`/`heal` (a cut of every
link, as `cluster isolate`), or a preferred replica election. Each answers one line; a fault
that cannot be carried out (a node already down, no fault proxy) answers why, never a trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from minibroker import chaos
from minibroker.client.admin_zk import election_partitions, request_preferred_replica_election
from minibroker.client.errors import ClientError
from minibroker.localcluster import ClusterError, zk_session
from minibroker.runtime.zk_errors import ZkError

NODE_ACTIONS = chaos.ACTIONS
ACTIONS = (*NODE_ACTIONS, "isolate", "heal", "elect-preferred")


@dataclass(frozen=True)
class FaultResult:
    ok: bool
    message: str


class Faults:
    """Carries out the page's faults on the cluster `backend()` names (None: the dashboard
    was started with ZooKeeper only, so it can show but not act)."""

    def __init__(
        self,
        zk_connect: str,
        backend: Callable[[], chaos.ChaosBackend] | None,
        hint: str = "",
    ) -> None:
        self.zk_connect = zk_connect
        self._backend = backend
        # Shown instead of the buttons when there is no backend: where to find them.
        self.hint = hint or (
            "" if backend is not None else
            "this dashboard only watches: fault buttons need `minibroker dashboard --dir DIR` "
            "(a process cluster) or `--compose [PROJECT]`"
        )  # fmt: skip
        self._lock = asyncio.Lock()  # one fault at a time, in the order they were asked for

    @property
    def mode(self) -> str | None:
        """ "process" or "compose" when the buttons can act, else None."""
        return None if self._backend is None else self._backend().kind

    async def run(self, action: str, target: str) -> FaultResult:
        if action not in ACTIONS:
            return FaultResult(False, f"unknown fault {action!r}: one of {', '.join(ACTIONS)}")
        async with self._lock:
            try:
                message = await asyncio.to_thread(self._run, action, target)
            except (ClusterError, ClientError, ZkError, ValueError) as exc:
                return FaultResult(False, f"{action} {target}: {exc}".strip())
        return FaultResult(True, message)

    def _run(self, action: str, target: str) -> str:
        if action == "elect-preferred":
            return self._elect_preferred()
        if self._backend is None:
            raise ClusterError(
                "this dashboard only watches: start it with --dir DIR (a process-mode cluster) "
                "or --compose [PROJECT] to use the fault buttons"
            )
        backend = self._backend()
        resolved = chaos.resolve_target(backend, target)
        if action == "isolate":
            links = backend.network_fault(chaos.NetworkFault("cut", resolved.name))
            return f"isolate: {resolved.name} ({len(links)} links cut)"
        if action == "heal":
            links = backend.heal_network(resolved.name)
            return f"heal: {resolved.name} ({len(links)} links healed)"
        chaos.perform(backend, action, resolved.name)
        details = ", ".join(filter(None, [resolved.reason, backend.describe(resolved.name)]))
        return f"{action}: {resolved.name} ({details})"

    def _elect_preferred(self) -> str:
        with zk_session(self.zk_connect) as zk:
            partitions = election_partitions(zk)
            if not partitions:
                raise ClusterError("the cluster has no topics: there is nothing to elect")
            request_preferred_replica_election(zk, partitions)  # ElectionInProgress: a line
        return f"preferred replica election started for {len(partitions)} partitions"
