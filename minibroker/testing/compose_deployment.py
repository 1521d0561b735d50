"""`Cluster(compose=True)`: the compose cluster (deploy/docker-compose.yml: ZooKeeper, three
brokers, two controllers, the dashboard, each in its container) behind the same API as the
process-mode one. It runs under a compose project of its own, which it starts with
`minibroker cluster up --compose`'s checks and takes down with `down -v` (containers, network,
volumes), also when the test run dies (a reaper, as in process mode).

What differs from process mode, and why:
- Its shape is the compose file's: 3 brokers and 2 controllers, Kafka clients on
  127.0.0.1:9092-9094, ZooKeeper on 127.0.0.1:2181, the dashboard on 127.0.0.1:8090. The
  ports are fixed, so one compose cluster runs on a machine at a time (pytest-xdist workers
  cannot each have one).
- `settings` reach every broker and controller through $MINIBROKER_SETTINGS, which the compose
  file passes on: a value cannot hold a space or a comma there, and the settings that say where
  a node listens or stores its data belong to the compose file.
- Network faults are made inside each container's network namespace (`isolate`,
  `cut_from_zookeeper`); there is no fault proxy (`proxy=True` is process mode's), so no delay
  or bandwidth limits.
- The timeline is read from the containers' logs (every life of each container).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minibroker import topology as t
from minibroker.chaos import ChaosError, ComposeBackend, compose_up
from minibroker.chaos.compose import PROJECT_LABEL, connect_docker
from minibroker.localcluster import ClusterError, reaper, secure_compose
from minibroker.localcluster.secure import configure_tools
from minibroker.localcluster.state import ADMIN_CONFIG
from minibroker.security.client_config import ClientSecurity, read_properties
from minibroker.testing.deployment import TAIL_LINES, NodeRow, Owned
from minibroker.testing.timeline import ContainerTimeline, Event

DEFAULT_PROJECT = "minibroker-testbed"
COMPOSE_FILE_ENV = "MINIBROKER_COMPOSE_FILE"
# Containers start in dependency order, each healthy only after its check passes: over 60 s
# on a slow 2-core machine (minibroker cluster up --compose waits as long).
READY_TIMEOUT_S = 180.0


def find_compose_file(given: Path | None) -> Path:
    """`given`, else $MINIBROKER_COMPOSE_FILE, else deploy/docker-compose.yml here or above."""
    path = given or (
        Path(os.environ[COMPOSE_FILE_ENV]) if os.environ.get(COMPOSE_FILE_ENV) else None
    )
    if path is not None:
        if not path.is_file():
            raise ClusterError(f"compose file {path} does not exist")
        return path.resolve()
    try:
        return compose_up.find_compose_file()
    except ChaosError:
        raise ClusterError(
            "compose=True needs minibroker's deploy/docker-compose.yml (and its images, "
            "`bash deploy/build-images.sh`): run in a minibroker checkout, or name the file "
            f"with compose_file= or ${COMPOSE_FILE_ENV}"
        ) from None


def environment(profile: str, settings: Mapping[str, str]) -> dict[str, str]:
    """compose_up.environment, failing as ClusterError."""
    return compose_up.environment(profile, [f"{k}={v}" for k, v in settings.items()])


class ComposeDeployment(Owned):
    """The compose cluster under `project` (see the module docstring)."""

    kind = "compose"

    def __init__(
        self,
        *,
        profile: str,
        settings: Mapping[str, str],
        secure: bool,
        keep: bool,
        ready_timeout_s: float,
        project: str | None,
        compose_file: Path | None,
    ) -> None:
        self.profile, self.settings, self.secure, self.keep = profile, settings, secure, keep
        self.ready_timeout_s = max(ready_timeout_s, READY_TIMEOUT_S)
        self.project = project or DEFAULT_PROJECT
        self._given_file = compose_file
        self.compose_file: Path | None = None
        self._secure_dir: Path | None = None
        self._client: Any = None
        self._started = False
        self._timeline = ContainerTimeline(lambda: self.backend().node_logs())

    def up(self) -> None:
        env = environment(self.profile, self.settings)
        self.compose_file = find_compose_file(self._given_file)
        self._client = connect_docker()
        theirs = self._client.containers.list(
            all=True, filters={"label": [f"{PROJECT_LABEL}={self.project}"]}
        )
        if theirs:
            raise ClusterError(
                f"compose project {self.project!r} already has containers "
                f"({', '.join(sorted(c.name for c in theirs))}): take it down "
                f"(`minibroker cluster down --compose {self.project}`) or name another project="
            )
        if self.secure:  # the host's copy of the security files: a folder of this cluster's own
            self._secure_dir = Path(tempfile.mkdtemp(prefix="minibroker-secure-"))
            env[secure_compose.HOST_DIR_ENV] = str(self._secure_dir)
        self._started = True
        if not self.keep:  # takes the project down if this process dies without down()
            self._reaper = reaper.start_compose(self.project, self.compose_file, self._secure_dir)
        try:
            compose_up.up(
                self.project, self.compose_file, self.ready_timeout_s, secure=self.secure, env=env
            )
            if self._secure_dir is not None:  # the admin's ZooKeeper login and certificate
                self._tools_configured = configure_tools(self._secure_dir)
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        if self._started and not self.keep and self.compose_file is not None:
            compose_up.down(self.project, self.compose_file)
            if self._secure_dir is not None:
                shutil.rmtree(self._secure_dir, ignore_errors=True)
        self._started = False
        self.release()

    def _up_or_raise(self) -> None:
        if not self._started:
            raise ClusterError("the cluster is not up: use `with Cluster(...)` or up()")

    @property
    def zk_connect(self) -> str:
        self._up_or_raise()
        return f"127.0.0.1:{t.ZOOKEEPER_PORT}"

    @property
    def bootstrap_servers(self) -> str:
        self._up_or_raise()
        return t.bootstrap_kafka_external()

    def broker_addresses(self) -> dict[int, str]:
        return {n.node_id: f"127.0.0.1:{n.external_port}" for n in t.nodes() if n.role == "broker"}

    def backend(self) -> ComposeBackend:
        self._up_or_raise()
        return ComposeBackend(self.project, self.zk_connect, client=self._client)

    def events(self, since_ms: int) -> list[Event]:
        self._up_or_raise()
        return self._timeline.read(since_ms)

    def security(self) -> ClientSecurity:
        if self._secure_dir is None:
            return ClientSecurity()
        return read_properties(self._secure_dir / ADMIN_CONFIG)

    def where(self) -> str:
        return (
            f"compose project {self.project!r} ({self.compose_file}; ZooKeeper {self.zk_connect})"
        )

    def kept(self) -> str:
        p = self.project
        return (
            f"compose project {p!r} left running (`minibroker cluster status --compose {p}`; its "
            f"dashboard: http://127.0.0.1:{t.DASHBOARD_PORT}/; `minibroker cluster down "
            f"--compose {p} --file {self.compose_file}` takes it down)"
        )

    def nodes(self) -> list[NodeRow]:
        backend = ComposeBackend(self.project, self.zk_connect, client=self._client)
        health = backend.health()
        rows = []
        for n in backend.nodes():  # each node is the compose service of its name
            state = health.get(n.name) or backend.state(n.name)
            rows.append(NodeRow(n.name, state, backend.describe(n.name)))
        return rows

    def log_tail(self, name: str, lines: int = TAIL_LINES) -> list[str]:
        text = self.backend().node_logs().get(name)
        if text is None:
            return ["(no container log)"]
        return [line[:500] for line in text.splitlines()[-lines:]]
