"""Fault injection through one interface (`ChaosBackend`) with two backends: the processes of a
process-mode cluster (with network faults when it runs the fault proxy) and the containers of a
compose cluster; the CLI and the load generator's fault schedule both act through it."""

from minibroker.chaos.backend import (
    ACTIONS,
    NETWORK_FAULTS,
    PEER_GROUPS,
    ChaosBackend,
    ChaosError,
    NetworkFault,
    Node,
    NodeState,
    perform,
)
from minibroker.chaos.compose import (
    DEFAULT_PROJECT,
    NODE_ID_LABEL,
    PROJECT_LABEL,
    ROLE_LABEL,
    SERVICE_LABEL,
    ComposeBackend,
)
from minibroker.chaos.factory import DEFAULT_ZK, backend_for
from minibroker.chaos.process import ProcessBackend
from minibroker.chaos.targets import (
    ALIASES,
    LeadershipReader,
    ReaderFactory,
    Resolved,
    is_alias,
    is_target,
    parse_target,
    resolve_target,
)

__all__ = [
    "ACTIONS",
    "ALIASES",
    "DEFAULT_PROJECT",
    "DEFAULT_ZK",
    "NETWORK_FAULTS",
    "NODE_ID_LABEL",
    "PEER_GROUPS",
    "PROJECT_LABEL",
    "ROLE_LABEL",
    "SERVICE_LABEL",
    "ChaosBackend",
    "ChaosError",
    "ComposeBackend",
    "LeadershipReader",
    "NetworkFault",
    "Node",
    "NodeState",
    "ProcessBackend",
    "ReaderFactory",
    "Resolved",
    "backend_for",
    "is_alias",
    "is_target",
    "parse_target",
    "perform",
    "resolve_target",
]
