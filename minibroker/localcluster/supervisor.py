"""Starting, stopping and signalling the cluster's processes: `up` (and waiting until every
broker is registered and a controller elected), `down`, kill/stop/pause/resume/start/restart."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from minibroker import topology
from minibroker.core.zk_layout import BrokerIdsZNode
from minibroker.faultproxy.model import LinkSpec
from minibroker.localcluster import secure as secure_mode
from minibroker.localcluster.locate import _children_or_empty, zk_session
from minibroker.localcluster.plan import plan
from minibroker.localcluster.ports import port_free
from minibroker.localcluster.processes import (
    EXIT_WAIT_S,
    _launch,
    _signal,
    _wait_dead,
    is_alive,
    log_tail,
    process_state,
)
from minibroker.localcluster.state import (
    DASHBOARD,
    FAULT_PROXY,
    HOST,
    LINKS_FILE,
    STATE_FILE,
    STOP_GRACE_S,
    ClusterError,
    ClusterState,
    ProcessInfo,
)
from minibroker.runtime import zk_server


def _prepare_dir(cluster_dir: Path) -> None:
    """Make `cluster_dir` empty and ours, refusing to touch a running cluster or foreign files."""
    state_path = cluster_dir / STATE_FILE
    if state_path.exists():
        old = ClusterState.load(cluster_dir)
        running = [p.name for p in old.processes if is_alive(p)]
        if running:
            raise ClusterError(
                f"a cluster is already running in {cluster_dir} ({', '.join(running)}); "
                f"`minibroker cluster down --dir {cluster_dir}` first"
            )
        shutil.rmtree(cluster_dir)
    elif cluster_dir.exists() and any(cluster_dir.iterdir()):
        raise ClusterError(f"{cluster_dir} is not empty and holds no {STATE_FILE}; choose --dir")
    cluster_dir.mkdir(parents=True, exist_ok=True)


def up(
    cluster_dir: Path,
    *,
    brokers: int = 3,
    controllers: int = 2,
    overrides: Sequence[str] = (),
    profile: str = "demo",
    zk_port: int | None = None,
    broker_port_base: int | None = None,
    ready_timeout_s: float = 30.0,
    proxy: bool = False,
    dashboard_port: int | None = None,
    secure: bool = False,
    kafka_port_base: int | None = None,
) -> ClusterState:
    """Start a fresh cluster and wait until it is ready (see module docstring). With `proxy`
    the fault proxy starts right after ZooKeeper and carries every link (see `plan`); with
    `secure`, certificates first and the admin's credentials in ZooKeeper before any broker
    (localcluster/secure.py)."""
    _prepare_dir(cluster_dir)
    state = plan(
        cluster_dir,
        brokers=brokers,
        controllers=controllers,
        overrides=overrides,
        profile=profile,
        zk_port=zk_port,
        broker_port_base=broker_port_base,
        proxy=proxy,
        dashboard_port=dashboard_port,
        secure=secure,
        kafka_port_base=kafka_port_base,
    )
    secured = (
        secure_mode.prepare(Path(state.dir), topology.nodes(brokers, controllers))
        if secure
        else None
    )
    addresses = [p.address for p in state.processes]
    addresses += [LinkSpec.from_json(link).listen_address for link in state.proxy_links]
    addresses += [f"{p.host}:{p.kafka_port}" for p in state.processes if p.kafka_port]
    busy = sorted({a for a in addresses if not port_free(int(a.rpartition(":")[2]))})
    if busy:
        raise ClusterError(f"ports already in use: {', '.join(busy)}")
    zk = state.processes[0]
    zk_server.write_config(Path(zk.data_dir), zk.port, HOST)
    try:
        for p in state.processes:
            Path(p.data_dir).mkdir(parents=True, exist_ok=True)
            if p.role == FAULT_PROXY:
                (Path(p.data_dir) / LINKS_FILE).write_text(json.dumps(state.proxy_links))
            _launch(p)
            state.save()  # every PID on disk at once, so `down` can always clean up
            _wait_started(p, ready_timeout_s)
            if p.role == "zookeeper" and secured is not None:
                _wait_zookeeper(p, ready_timeout_s)
                secure_mode.add_admin(Path(state.dir), state.zk_connect, secured.admin_password)
        wait_ready(state, ready_timeout_s)
    except BaseException:
        down(state)
        raise
    return state


def _wait_started(p: ProcessInfo, timeout_s: float) -> None:
    """Wait until a process the others need is there: ZooKeeper, or the fault proxy (whose
    control port listens once every link does)."""
    if p.role == "zookeeper":
        _wait_zookeeper(p, timeout_s)
    elif p.role in (FAULT_PROXY, DASHBOARD):
        what = "the fault proxy" if p.role == FAULT_PROXY else "the dashboard"
        deadline = time.monotonic() + timeout_s
        while not _accepts(p.host, p.port):
            if not is_alive(p):
                raise ClusterError(f"{what} exited during start-up:\n{log_tail(p)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} not ready within {timeout_s} s")
            time.sleep(0.05)


def _accepts(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def _wait_zookeeper(zk: ProcessInfo, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = zk_server.four_letter(zk.host, zk.port)
        if answer and "Mode:" in answer:
            return
        if not is_alive(zk):
            raise ClusterError(f"ZooKeeper exited during start-up:\n{log_tail(zk)}")
        time.sleep(0.1)
    raise ClusterError(f"ZooKeeper not ready within {timeout_s} s:\n{log_tail(zk)}")


def wait_ready(state: ClusterState, timeout_s: float) -> None:
    """Wait until every broker is registered and a controller is elected."""
    want = {p.id for p in state.by_role("broker")}
    deadline = time.monotonic() + timeout_s
    with zk_session(state.zk_connect) as zk:
        while True:
            for p in state.processes:
                if not is_alive(p):
                    raise ClusterError(f"{p.name} exited during start-up:\n{log_tail(p)}")
            registered = {int(c) for c in _children_or_empty(zk, BrokerIdsZNode.path)}
            if want <= registered and zk.read_controller() is not None:
                return
            if time.monotonic() > deadline:
                missing = sorted(i for i in want - registered if i is not None)
                raise ClusterError(
                    f"cluster not ready within {timeout_s} s: brokers not registered {missing}, "
                    f"controller elected: {zk.read_controller() is not None}"
                )
            time.sleep(0.05)


# ---- the other commands ---------------------------------------------------------------------


def down(state: ClusterState, timeout_s: float = 10.0) -> list[str]:
    """Stop every process: programs first (SIGTERM), then the fault proxy (their controlled
    shutdown and ZooKeeper sessions go through it), ZooKeeper last; SIGKILL what lingers.
    Returns the names that had to be killed."""
    programs = [p for p in state.processes if p.role not in ("zookeeper", FAULT_PROXY)]
    zk = state.by_role("zookeeper")
    killed = []
    for group in (programs, state.by_role(FAULT_PROXY), zk):
        for p in group:
            _signal(p, signal.SIGCONT)  # a paused process cannot handle SIGTERM
            _signal(p, signal.SIGTERM)
        for p in _wait_dead(group, timeout_s):
            _signal(p, signal.SIGKILL)
            killed.append(p.name)
        _wait_dead(group, EXIT_WAIT_S)
    return killed


def send(state: ClusterState, name: str, action: str) -> ProcessInfo:
    """kill (SIGKILL), stop (SIGTERM; SIGKILL after STOP_GRACE_S, as `docker stop` does),
    pause (SIGSTOP) or resume (SIGCONT) one process."""
    sigs = {
        "kill": signal.SIGKILL,
        "stop": signal.SIGTERM,
        "pause": signal.SIGSTOP,
        "resume": signal.SIGCONT,
    }
    info = state.process(name)
    if action == "stop":
        _signal(info, signal.SIGCONT)
    if not _signal(info, sigs[action]):
        raise ClusterError(f"{name} is not running (pid {info.pid})")
    if action == "stop" and _wait_dead([info], STOP_GRACE_S):
        _signal(info, signal.SIGKILL)
    if action in ("kill", "stop") and _wait_dead([info], EXIT_WAIT_S):
        raise ClusterError(f"{name} (pid {info.pid}) did not exit after {action}")
    if action in ("pause", "resume"):
        # Signals are delivered when the target is next scheduled: return once it took effect,
        # so a fault's time is when the process really stopped (or went on).
        want = "paused" if action == "pause" else "running"
        deadline = time.monotonic() + 5.0
        while process_state(info) not in (want, "dead") and time.monotonic() < deadline:
            time.sleep(0.005)
    return info


def start(state: ClusterState, name: str) -> ProcessInfo:
    """Start a process that is not running (killed or stopped) with its recorded command."""
    info = state.process(name)
    if is_alive(info):
        raise ClusterError(f"{name} is already running (pid {info.pid}); restart it instead")
    _launch(info)
    state.save()
    _wait_started(info, 30.0)
    return info


def restart(state: ClusterState, name: str) -> ProcessInfo:
    """Stop the process if it runs (SIGTERM), then start it again with the same command."""
    if is_alive(state.process(name)):
        send(state, name, "stop")
    return start(state, name)
