"""Where a test cluster runs: what `Cluster` needs of it, whichever it is. A process-mode
cluster (`ProcessDeployment`: real local processes, `minibroker cluster up`'s) or a compose
cluster (`minibroker.testing.compose_deployment.ComposeDeployment`: the containers of
deploy/docker-compose.yml). `Cluster` reads ZooKeeper, dials the brokers and applies faults
through the chaos backend the same way on both."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from minibroker import localcluster
from minibroker.chaos import ChaosBackend, ProcessBackend
from minibroker.localcluster import ClusterError, ClusterState, reaper
from minibroker.localcluster.secure import configure_tools, forget_tools
from minibroker.security.client_config import ClientSecurity, read_properties
from minibroker.testing.timeline import Event, Timeline
from minibroker.topology import DASHBOARD_PORT

TAIL_LINES = 15


@dataclass(frozen=True)
class NodeRow:
    """One node as a failure report lists it: name, state (running, paused, dead; a
    container's health), where it runs (a PID, a container)."""

    name: str
    state: str
    where: str


class Deployment(Protocol):
    kind: str

    def up(self) -> None: ...

    def down(self) -> None: ...

    @property
    def zk_connect(self) -> str: ...

    @property
    def bootstrap_servers(self) -> str: ...

    def broker_addresses(self) -> dict[int, str]:
        """Every broker's gRPC address (as the host reaches it) by id."""
        ...

    def backend(self) -> ChaosBackend: ...

    def events(self, since_ms: int) -> list[Event]: ...

    def security(self) -> ClientSecurity: ...

    def where(self) -> str:
        """One line: where the cluster runs and how to reach it."""
        ...

    def kept(self) -> str:
        """What to run to inspect, and to stop, a cluster left running (`keep`)."""
        ...

    def nodes(self) -> list[NodeRow]: ...

    def log_tail(self, name: str, lines: int = TAIL_LINES) -> list[str]: ...


def setting_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Owned:
    """What a test cluster holds in this process besides the cluster itself: its reaper (which
    tears the cluster down if this process dies without down()) and, for a secure cluster,
    the admin's login and certificate configured for this process's tools."""

    _reaper: subprocess.Popen[bytes] | None = None
    _tools_configured = False

    def release(self) -> None:
        """The end of down(): the tools forgotten, and last the reaper stopped (an interrupted
        down() leaves it on watch)."""
        if self._tools_configured:
            forget_tools()
            self._tools_configured = False
        if self._reaper is not None:
            self._reaper.kill()
            self._reaper.wait()
            self._reaper = None


class ProcessDeployment(Owned):
    """Real local processes in a directory (a new temporary one unless given), with a reaper
    that tears them down if the process that started them dies without down()."""

    kind = "process"

    def __init__(
        self,
        *,
        brokers: int,
        controllers: int,
        profile: str,
        settings: Mapping[str, str],
        proxy: bool,
        secure: bool,
        directory: Path | None,
        keep: bool,
        ready_timeout_s: float,
        kafka_port_base: int | None,
    ) -> None:
        self.brokers, self.controllers = brokers, controllers
        self.profile, self.settings = profile, settings
        self.proxy, self.secure, self.keep = proxy, secure, keep
        self.ready_timeout_s, self.kafka_port_base = ready_timeout_s, kafka_port_base
        self._given_dir = directory
        self._dir: Path | None = None
        self._state: ClusterState | None = None
        self._timeline = Timeline()

    def up(self) -> None:
        if self._given_dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="minibroker-")) / "cluster"
        else:
            self._dir = self._given_dir
        theirs = (self._dir / localcluster.STATE_FILE).exists()  # a cluster already there
        if not self.keep and not theirs:  # tears it down if this process dies without down()
            remove = self._dir.parent if self._given_dir is None else None
            self._reaper = reaper.start(self._dir, remove)
        overrides = [f"{k}={v}" for k, v in self.settings.items()]
        try:
            self._state = localcluster.up(
                self._dir, brokers=self.brokers, controllers=self.controllers,
                overrides=overrides, profile=self.profile, proxy=self.proxy,
                secure=self.secure, ready_timeout_s=self.ready_timeout_s,
                kafka_port_base=self.kafka_port_base,
            )  # fmt: skip
            if self.secure:  # the admin's ZooKeeper login and gRPC certificate, for this process
                self._tools_configured = configure_tools(self._dir)
        except BaseException:
            if not theirs:  # never tear down a cluster this one did not start
                self.down()
            raise

    def down(self) -> None:
        if self._dir is not None and (self._dir / localcluster.STATE_FILE).exists():
            state = ClusterState.load(self._dir)
            if not self.keep:
                localcluster.down(state, timeout_s=0)
        if self._dir is not None and not self.keep and self._given_dir is None:
            shutil.rmtree(self._dir.parent, ignore_errors=True)
        self._state = None
        self.release()

    @property
    def state(self) -> ClusterState:
        if self._dir is None or self._state is None:
            raise ClusterError("the cluster is not up: use `with Cluster(...)` or up()")
        self._state = ClusterState.load(self._dir)
        return self._state

    @property
    def zk_connect(self) -> str:
        return self.state.zk_connect

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{b.host}:{b.kafka_port}" for b in self.state.by_role("broker"))

    def broker_addresses(self) -> dict[int, str]:
        return {b.id: b.address for b in self.state.by_role("broker") if b.id is not None}

    def backend(self) -> ChaosBackend:
        return ProcessBackend(Path(self.state.dir))

    def events(self, since_ms: int) -> list[Event]:
        return self._timeline.read(self.state, since_ms)

    def security(self) -> ClientSecurity:
        path = self.state.admin_client_config
        return read_properties(Path(path)) if path else ClientSecurity()

    def where(self) -> str:
        state = self.state
        return f"cluster: {state.dir} (ZooKeeper {state.zk_connect})"

    def kept(self) -> str:
        d = self.state.dir
        return (
            f"left running in {d} (`minibroker cluster status --dir {d}`; "
            f"`minibroker dashboard --dir {d}` serves its dashboard on "
            f"http://127.0.0.1:{DASHBOARD_PORT}/; `minibroker cluster down --dir {d}` stops it)"
        )

    def nodes(self) -> list[NodeRow]:
        return [
            NodeRow(p.name, localcluster.process_state(p), f"pid {p.pid}")
            for p in self.state.processes
            if p.role not in localcluster.TOOL_ROLES
        ]

    def log_tail(self, name: str, lines: int = TAIL_LINES) -> list[str]:
        path = self.state.process(name).log_file
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            return [f"(no log at {path})"]
        return [f"({path})"] + [line[:500] for line in text.splitlines()[-lines:]]
