"""Process-mode cluster: a real ZooKeeper, N brokers and M controllers as local processes.

`up` starts them detached (own session, output to one log file each), waits until every broker
is registered and a controller is elected, and writes `cluster.json` in the cluster dir; every
other command reads that state file. Processes are only ever signalled by the PID recorded
there, and only after checking that the PID still runs the command we started.
"""

from __future__ import annotations

from minibroker.localcluster.locate import ClusterStatus, status, zk_session
from minibroker.localcluster.plan import plan
from minibroker.localcluster.ports import free_ports, port_free
from minibroker.localcluster.processes import is_alive, log_tail, process_state
from minibroker.localcluster.state import (
    CONTROLLER_ID_BASE,
    DASHBOARD,
    DEFAULT_DIR,
    FAULT_PROXY,
    HOST,
    LINKS_FILE,
    STATE_FILE,
    STOP_GRACE_S,
    TOOL_ROLES,
    ClusterError,
    ClusterState,
    ProcessInfo,
)
from minibroker.localcluster.supervisor import down, restart, send, start, up, wait_ready

__all__ = [
    "CONTROLLER_ID_BASE",
    "ClusterError",
    "ClusterState",
    "ClusterStatus",
    "DEFAULT_DIR",
    "DASHBOARD",
    "FAULT_PROXY",
    "HOST",
    "LINKS_FILE",
    "ProcessInfo",
    "STATE_FILE",
    "STOP_GRACE_S",
    "TOOL_ROLES",
    "free_ports",
    "port_free",
    "down",
    "is_alive",
    "log_tail",
    "plan",
    "process_state",
    "restart",
    "send",
    "start",
    "status",
    "up",
    "wait_ready",
    "zk_session",
]
