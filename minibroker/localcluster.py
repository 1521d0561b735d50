"""Process-mode cluster: a real ZooKeeper, N brokers and M controllers as local processes.

`up` starts them detached (own session, output to one log file each), waits until every broker
is registered and a controller is elected, and writes `cluster.json` in the cluster dir; every
other command reads that state file. Processes are only ever signalled by the PID recorded
there, and only after checking that the PID still runs the command we started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minibroker import topology
from minibroker.core.zk_layout import BrokerIdsZNode, BrokerIdZNode
from minibroker.faultproxy.model import LinkSpec
from minibroker.runtime import zk_server
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkError, ZkNoNode, ZkStore

STATE_FILE = "cluster.json"
DEFAULT_DIR = ".minibroker"
# Controller ids are their own id space, written as /controller's "brokerid" (design §1).
CONTROLLER_ID_BASE = topology.CONTROLLER_ID_BASE
HOST = "127.0.0.1"
# Seconds a clean stop may take before the process is killed (docker stop's timeout too).
STOP_GRACE_S = 30
# `up --proxy`: the fault proxy's process name (and role), and its link table in its dir.
FAULT_PROXY = "faultproxy"
LINKS_FILE = "links.json"


class ClusterError(RuntimeError):
    """A cluster command cannot be carried out; the message says why and what to do."""


@dataclass
class ProcessInfo:
    name: str
    role: str  # "zookeeper" | "broker" | "controller" | "faultproxy" (port: its control port)
    id: int | None
    host: str
    port: int
    data_dir: str
    log_file: str
    cmd: list[str]
    pid: int = -1
    metrics_port: int = 0  # brokers' Prometheus endpoint on 127.0.0.1; 0 = none

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ClusterState:
    dir: str
    zk_connect: str
    profile: str
    overrides: list[str] = field(default_factory=list)
    processes: list[ProcessInfo] = field(default_factory=list)
    # `up --proxy`: every link of the fault proxy (LinkSpec.to_json()); empty without one.
    proxy_links: list[dict[str, Any]] = field(default_factory=list)

    def save(self) -> None:
        path = Path(self.dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, cluster_dir: Path) -> ClusterState:
        path = cluster_dir / STATE_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster in {cluster_dir} (no {STATE_FILE}); start one with "
                f"`minibroker cluster up --dir {cluster_dir}`"
            ) from None
        procs = [ProcessInfo(**p) for p in raw.pop("processes")]
        return cls(processes=procs, **raw)

    def process(self, name: str) -> ProcessInfo:
        for p in self.processes:
            if p.name == name:
                return p
        names = ", ".join(p.name for p in self.processes)
        raise ClusterError(f"no process named {name!r} in this cluster (have: {names})")

    def by_role(self, role: str) -> list[ProcessInfo]:
        return [p for p in self.processes if p.role == role]

    def fault_proxy(self) -> ProcessInfo | None:
        """The fault proxy's process, if the cluster was started with one."""
        return next(iter(self.by_role(FAULT_PROXY)), None)


# ---- process liveness, by PID and command line ----------------------------------------------


def _proc_state(pid: int) -> str | None:
    """The kernel's one-letter state of a process, or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _reap(pid: int) -> None:
    # Collect our own exited children so they do not linger as zombies.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _runs_our_command(info: ProcessInfo) -> bool:
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes()
    except OSError:
        return False
    if not cmdline:
        # Our child mid-exec: Popen returns once the exec closed its close-on-exec pipe, but
        # the kernel fills in the new image's arguments a little later (under load, long
        # enough for a start-up check to take the process for dead).
        return _parent_pid(info.pid) == os.getpid()
    return cmdline.rstrip(b"\0").split(b"\0") == [c.encode() for c in info.cmd]


def process_state(info: ProcessInfo) -> str:
    """ "running", "paused", or "dead" (exited, a zombie, or the PID now runs something else)."""
    if info.pid <= 0:
        return "dead"
    _reap(info.pid)
    state = _proc_state(info.pid)
    if state is None or state in ("Z", "X") or not _runs_our_command(info):
        return "dead"
    return "paused" if state in ("T", "t") else "running"


def is_alive(info: ProcessInfo) -> bool:
    return process_state(info) != "dead"


def _signal(info: ProcessInfo, sig: signal.Signals) -> bool:
    """Send `sig` to the process if it is still ours; whether it was sent."""
    if not is_alive(info):
        return False
    try:
        os.kill(info.pid, sig)
    except ProcessLookupError:
        return False
    return True


def _wait_dead(infos: Sequence[ProcessInfo], timeout_s: float) -> list[ProcessInfo]:
    deadline = time.monotonic() + timeout_s
    alive = [p for p in infos if is_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_alive(p)]
    return alive


# ---- starting processes ---------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ports_below_ephemeral(count: int) -> list[int]:
    """`count` free ports just below the kernel's ephemeral range. A proxied cluster reserves
    some 60 ports a second or two before its processes bind them; in the ephemeral range any
    process's connect() or bind(0) may take one meanwhile, below it none does. The scan starts
    at an offset of our pid, so plans made at the same time rarely meet."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _free_ports(count)
    first = max(1024, low - 10_000)
    span = low - first
    out: list[int] = []
    for i in range(span):
        port = first + (os.getpid() * 7919 + i) % span
        if _port_free(port):
            out.append(port)
            if len(out) == count:
                return out
    return _free_ports(count)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _launch(info: ProcessInfo) -> None:
    Path(info.log_file).parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("MINIBROKER_PROFILE", None)
    with open(info.log_file, "ab") as log:
        proc = subprocess.Popen(
            info.cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=info.data_dir,
            env=env,
            start_new_session=True,  # survives the CLI; never gets the terminal's Ctrl-C
        )
    info.pid = proc.pid


def log_tail(info: ProcessInfo, lines: int = 15) -> str:
    try:
        text = Path(info.log_file).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _program_cmd(
    program: str, node_args: list[str], state: ClusterState, zk_connect: str = ""
) -> list[str]:
    cmd = [sys.executable, "-m", program, *node_args, "--zk", zk_connect or state.zk_connect]
    cmd += ["--profile", state.profile]
    for o in state.overrides:
        cmd += ["--set", o]
    return cmd


def plan(
    cluster_dir: Path,
    *,
    brokers: int,
    controllers: int,
    overrides: Sequence[str],
    profile: str,
    zk_port: int | None,
    broker_port_base: int | None,
    proxy: bool = False,
) -> ClusterState:
    """The processes of a cluster, their ports, dirs and command lines (nothing started).
    With `proxy`, a fault proxy carries every link (topology.proxied_settings): a broker's
    recorded port is then the proxy's port of its client link, what clients use."""
    if brokers < 1 or controllers < 1:
        raise ClusterError("a cluster needs at least one broker and one controller")
    if brokers >= CONTROLLER_ID_BASE:
        raise ClusterError(
            f"at most {CONTROLLER_ID_BASE - 1} brokers (controller ids start at 101)"
        )
    Settings.load(profile=profile, overrides=overrides)  # validate before starting anything
    d = cluster_dir.resolve()
    all_nodes = topology.nodes(brokers, controllers)
    links = topology.proxy_links(all_nodes) if proxy else []
    listeners = sum(len(topology.node_listeners(n, all_nodes)) for n in all_nodes) if proxy else 0
    count = 2 + 2 * (brokers + controllers) + len(links) + listeners
    free = iter(_ports_below_ephemeral(count) if proxy else _free_ports(count))
    zk_port = zk_port or next(free)
    state = ClusterState(dir=str(d), zk_connect=f"{HOST}:{zk_port}", profile=profile)
    state.overrides = list(overrides)
    install = zk_server.find_zookeeper()
    zk_dir = d / "zookeeper"
    zk_cfg = zk_dir / "zoo.cfg"
    state.processes.append(
        ProcessInfo(
            name="zookeeper",
            role="zookeeper",
            id=None,
            host=HOST,
            port=zk_port,
            data_dir=str(zk_dir),
            log_file=str(d / "logs" / "zookeeper.log"),
            cmd=zk_server.command(install, zk_cfg, d / "logs"),
        )
    )

    link_ports: dict[tuple[str, str], int] = {}
    if proxy:
        link_ports = _plan_fault_proxy(state, links, free, broker_port_base)
    # (source, target) -> the port the proxy forwards that link to: the target's listener
    # for that source, or ZooKeeper's client port.
    targets = {(src, dst): zk_port for src, dst in links if dst == topology.ZOOKEEPER}

    # Names, ids and arguments come from the topology shared with deploy/docker-compose.yml;
    # only the ports (free ones) and the loopback listeners are this mode's own.
    for node in all_nodes:
        port, metrics_port, settings = _node_settings(
            node, all_nodes, free, broker_port_base, link_ports, targets
        )
        zk_connect = settings.get("zookeeper.connect", "")  # proxied: the node's own link
        args = topology.node_args(node, str(d / node.name / "data"), settings)
        state.processes.append(
            ProcessInfo(
                metrics_port=metrics_port,
                name=node.name,
                role=node.role,
                id=node.node_id,
                host=HOST,
                port=port,
                data_dir=str(d / node.name),
                log_file=str(d / "logs" / f"{node.name}.log"),
                cmd=_program_cmd(node.program, args, state, zk_connect),
            )
        )
    state.proxy_links = [
        LinkSpec(src, dst, link_ports[(src, dst)], targets[(src, dst)]).to_json()
        for src, dst in links
    ]
    return state


def _node_settings(
    node: topology.Node,
    all_nodes: list[topology.Node],
    free: Iterator[int],
    broker_port_base: int | None,
    link_ports: dict[tuple[str, str], int],
    targets: dict[tuple[str, str], int],
) -> tuple[int, int, dict[str, str]]:
    """A node's recorded port, metrics port and deployment settings: one PLAINTEXT listener,
    or with the proxy (`link_ports`) one listener per source, each recorded in `targets` as
    where the proxy forwards that source's link."""
    if not link_ports:
        port = next(free)
        if node.role == "broker" and broker_port_base:
            port = broker_port_base + node.index - 1
        metrics_port = next(free)
        return port, metrics_port, topology.process_settings(node, HOST, port, metrics_port)
    metrics_port = next(free)
    own = topology.node_listeners(node, all_nodes)
    listen = {listener: next(free) for listener, _ in own}
    targets.update({(src, node.name): listen[n] for n, src in own if src is not None})
    settings = topology.proxied_settings(node, all_nodes, HOST, listen, link_ports, metrics_port)
    return link_ports[(topology.CLIENT_SOURCE, node.name)], metrics_port, settings


def _plan_fault_proxy(
    state: ClusterState,
    links: list[tuple[str, str]],
    free: Iterator[int],
    broker_port_base: int | None,
) -> dict[tuple[str, str], int]:
    """Add the fault proxy's process to `state`; the proxy's port of every link. The pinned
    broker ports (--broker-port-base) are those of the client links: what clients dial."""
    d = Path(state.dir)
    control_port = next(free)
    proxy_dir = d / FAULT_PROXY
    cmd = [sys.executable, "-m", "minibroker.faultproxy", "--links", str(proxy_dir / LINKS_FILE)]
    state.processes.append(
        ProcessInfo(
            name=FAULT_PROXY,
            role=FAULT_PROXY,
            id=None,
            host=HOST,
            port=control_port,
            data_dir=str(proxy_dir),
            log_file=str(d / "logs" / f"{FAULT_PROXY}.log"),
            cmd=[*cmd, "--port", str(control_port), "--name", FAULT_PROXY],
        )
    )
    ports = {}
    for src, dst in links:
        if src == topology.CLIENT_SOURCE and dst.startswith("broker-") and broker_port_base:
            ports[(src, dst)] = broker_port_base + int(dst.removeprefix("broker-")) - 1
        else:
            ports[(src, dst)] = next(free)
    return ports


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
) -> ClusterState:
    """Start a fresh cluster and wait until it is ready (see module docstring). With `proxy`
    the fault proxy starts right after ZooKeeper and carries every link (see `plan`)."""
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
    )
    addresses = [p.address for p in state.processes]
    addresses += [LinkSpec.from_json(link).listen_address for link in state.proxy_links]
    busy = sorted({a for a in addresses if not _port_free(int(a.rpartition(":")[2]))})
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
    elif p.role == FAULT_PROXY:
        deadline = time.monotonic() + timeout_s
        while not _accepts(p.host, p.port):
            if not is_alive(p):
                raise ClusterError(f"the fault proxy exited during start-up:\n{log_tail(p)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"the fault proxy not ready within {timeout_s} s")
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


@contextlib.contextmanager
def zk_session(zk_connect: str, timeout_ms: int = 5000) -> Iterator[ZkStore]:
    store = ZkStore(zk_connect, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    store.start()
    try:
        yield store
    finally:
        store.stop()


def _children_or_empty(zk: ZkStore, path: str) -> list[str]:
    try:
        return zk.children(path)
    except ZkNoNode:
        return []


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
        _wait_dead(group, 5.0)
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
    if action in ("kill", "stop") and _wait_dead([info], 10.0):
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


@dataclass
class ClusterStatus:
    state: ClusterState
    process_states: dict[str, str]
    zk_reachable: bool
    controller_id: int | None = None
    controller_epoch: int | None = None
    registered: dict[int, int] = field(default_factory=dict)  # broker id -> broker epoch

    @property
    def controller_name(self) -> str | None:
        for p in self.state.by_role("controller"):
            if p.id == self.controller_id:
                return p.name
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": self.state.dir,
            "zookeeper_connect": self.state.zk_connect,
            "profile": self.state.profile,
            "zookeeper_reachable": self.zk_reachable,
            "controller": {
                "id": self.controller_id,
                "name": self.controller_name,
                "epoch": self.controller_epoch,
            },
            "registered_brokers": {str(k): {"broker_epoch": v} for k, v in self.registered.items()},
            "processes": [
                {
                    "name": p.name,
                    "role": p.role,
                    "id": p.id,
                    "pid": p.pid,
                    "address": p.address,
                    "data_dir": p.data_dir,
                    "log_file": p.log_file,
                    "metrics": f"http://{p.host}:{p.metrics_port}/metrics"
                    if p.metrics_port
                    else None,
                    "state": self.process_states[p.name],
                    "alive": self.process_states[p.name] != "dead",
                }
                for p in self.state.processes
            ],
        }


def status(state: ClusterState) -> ClusterStatus:
    st = ClusterStatus(
        state=state,
        process_states={p.name: process_state(p) for p in state.processes},
        zk_reachable=False,
    )
    if st.process_states.get("zookeeper") != "running":
        return st
    try:
        with zk_session(state.zk_connect, timeout_ms=2000) as zk:
            st.zk_reachable = True
            st.controller_id = zk.read_controller()
            epoch = zk.read_controller_epoch()
            st.controller_epoch = epoch[0] if epoch else None
            for child in _children_or_empty(zk, BrokerIdsZNode.path):
                stat = zk.exists(BrokerIdZNode.path(int(child)))
                if stat is not None:
                    st.registered[int(child)] = stat.czxid
    except ZkError:
        st.zk_reachable = False
    return st
