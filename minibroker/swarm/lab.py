"""A swarm of several machines on one: each node a container of
minibroker-swarm-node:dev (deploy/swarm: Debian's Docker Engine inside) with its own engine,
joined into one swarm (the first node its manager), the project's images loaded into every
engine with `docker save | docker load` (no registry), and the node labels deploy/stack.yml
places ZooKeeper and the brokers by: node-N runs broker-N, node-1 ZooKeeper too.

The host reaches each engine at a unix socket bind-mounted from the node
(`<dir>/node-N/docker.sock`): `docker -H unix://...` as `docker -H ssh://machine` on real
machines. A whole machine dies by `docker kill` of its node container (its engine and every
container on it with it) and comes back by `docker start` (the engine's data is in a volume).

    lab = SwarmLab("mbswarm").up()      # three nodes, a swarm, images loaded, labels set
    lab.nodes[1].docker_host            # unix:///tmp/mbswarm-.../node-2/docker.sock
    lab.down()                          # containers, volumes, network, sockets: all gone
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker import topology as t
from minibroker.chaos.compose import connect_docker
from minibroker.localcluster import ClusterError

NODE_IMAGE = "minibroker-swarm-node:dev"
LAB_LABEL = "org.minibroker.swarm-lab"  # on every container, volume and network of a lab
STACK_IMAGES = (t.RUNTIME_IMAGE, t.ZOOKEEPER_IMAGE)
MTU = 1400  # these machines' engines use 1400; the overlay inside takes VXLAN's 50 off it


@dataclass(frozen=True)
class LabNode:
    name: str  # node-1, ... (the container's hostname: the swarm's node name)
    container: str
    address: str  # on the lab's network: where the other nodes and the host reach it
    socket_dir: Path

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket_dir}/docker.sock"


def docker(node: LabNode, *args: str, check: bool = True, timeout: float = 120) -> str:
    """`docker -H <node> ARGS`: the CLI against one node's engine; its stdout."""
    result = subprocess.run(
        ["docker", "-H", node.docker_host, *args], capture_output=True, text=True,
        timeout=timeout, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if check and result.returncode != 0:
        raise ClusterError(f"docker {' '.join(args)} on {node.name}: {result.stderr.strip()}")
    return result.stdout


class SwarmLab:
    def __init__(
        self,
        prefix: str = "mbswarm",
        nodes: int = 3,
        *,
        storage_driver: str = "overlay2",
        images: Sequence[str] = STACK_IMAGES,
        client: Any | None = None,
    ) -> None:
        self.prefix = prefix
        self.count = nodes
        self.storage_driver = storage_driver
        self.images = tuple(images)
        self.client = client if client is not None else connect_docker()
        self.dir: Path | None = None
        self.nodes: list[LabNode] = []

    @property
    def network(self) -> str:
        return f"{self.prefix}-net"

    def container_name(self, index: int) -> str:
        return f"{self.prefix}-node-{index}"

    # ---- up --------------------------------------------------------------------------------

    def up(self, timeout_s: float = 180) -> SwarmLab:
        if self.client.containers.list(all=True, filters={"label": f"{LAB_LABEL}={self.prefix}"}):
            raise ClusterError(
                f"a swarm lab {self.prefix!r} exists already: `minibroker swarm lab down` first"
            )
        try:
            self.client.images.get(NODE_IMAGE)
        except Exception:
            raise ClusterError(
                f"no {NODE_IMAGE} image: run `bash deploy/build-images.sh --swarm`"
            ) from None
        try:
            self._start_nodes(timeout_s)
            self._form_swarm()
            self._load_images()
        except BaseException:
            self.down()
            raise
        return self

    def _start_nodes(self, timeout_s: float) -> None:
        labels = {LAB_LABEL: self.prefix}
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.client.networks.create(
            self.network, driver="bridge", labels=labels,
            options={"com.docker.network.driver.mtu": str(MTU)},
        )  # fmt: skip
        for i in range(1, self.count + 1):
            name = f"node-{i}"
            sockets = self.dir / name
            sockets.mkdir()
            volume = f"{self.container_name(i)}-docker"
            self.client.volumes.create(volume, labels=labels)
            # --privileged asks for every capability, and these machines' engines lack
            # CAP_SYS_RESOURCE (runc: "unable to apply caps"): all but that one, no seccomp or
            # AppArmor profile, /proc unmasked (the CLI's systempaths, which the SDK lacks);
            # the entrypoint makes /sys and the cgroup controllers writable.
            run = subprocess.run(
                ["docker", "run", "-d", "--name", self.container_name(i), "--hostname", name,
                 "--label", f"{LAB_LABEL}={self.prefix}", "--network", self.network,
                 "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--device", "/dev/fuse",
                 "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
                 "--security-opt", "systempaths=unconfined",
                 "-e", f"NODE_STORAGE_DRIVER={self.storage_driver}", "-e", f"NODE_MTU={MTU}",
                 "-v", f"{volume}:/var/lib/docker", "-v", f"{sockets}:/run/minibroker-node",
                 NODE_IMAGE],
                capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if run.returncode != 0:
                raise ClusterError(f"starting {name}: {run.stderr.strip()}")
        deadline = time.monotonic() + timeout_s
        for i in range(1, self.count + 1):
            c = self.client.containers.get(self.container_name(i))
            address = c.attrs["NetworkSettings"]["Networks"][self.network]["IPAddress"]
            node = LabNode(f"node-{i}", c.name, address, self.dir / f"node-{i}")
            self._wait_engine(node, deadline)
            self.nodes.append(node)

    def _wait_engine(self, node: LabNode, deadline: float) -> None:
        while True:
            probe = subprocess.run(
                ["docker", "-H", node.docker_host, "info", "--format", "{{.ServerVersion}}"],
                capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if probe.returncode == 0:
                return
            c = self.client.containers.get(node.container)
            if c.status != "running" or time.monotonic() > deadline:
                logs = c.logs(tail=20).decode(errors="replace")
                raise ClusterError(f"{node.name}'s engine did not start ({c.status}):\n{logs}")
            time.sleep(0.5)

    def _form_swarm(self) -> None:
        manager = self.nodes[0]
        docker(manager, "swarm", "init", "--advertise-addr", manager.address)
        token = docker(manager, "swarm", "join-token", "-q", "worker").strip()
        for node in self.nodes[1:]:
            docker(node, "swarm", "join", "--token", token, f"{manager.address}:2377")
        for i, node in enumerate(self.nodes, start=1):
            labels = [f"minibroker.broker-{i}=true"] if i <= t.DEFAULT_BROKERS else []
            if i == 1:
                labels.append(f"minibroker.{t.ZOOKEEPER}=true")
            for label in labels:
                docker(manager, "node", "update", "--label-add", label, node.name)

    def _load_images(self) -> None:
        """The project's images into every engine (no registry): one `docker save` to a file,
        one `docker load` a node."""
        assert self.dir is not None
        archive = self.dir / "images.tar"
        saved = subprocess.run(
            ["docker", "save", "-o", str(archive), *self.images],
            capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if saved.returncode != 0:
            raise ClusterError(
                f"docker save {' '.join(self.images)}: {saved.stderr.strip()} "
                "(`bash deploy/build-images.sh` builds them)"
            )
        try:
            for node in self.nodes:
                docker(node, "load", "-q", "-i", str(archive), timeout=600)
        finally:
            archive.unlink(missing_ok=True)

    # ---- faults on machines ------------------------------------------------------------------

    def node(self, name: str) -> LabNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ClusterError(f"no node {name!r} (have {', '.join(n.name for n in self.nodes)})")

    def kill_node(self, name: str) -> None:
        """The machine dies: its engine and every container on it, at once."""
        self.client.containers.get(self.node(name).container).kill()

    def start_node(self, name: str, timeout_s: float = 120) -> None:
        """The machine comes back: its engine starts with its data (the swarm's tasks that ran
        there do not come back by themselves under restart_policy none)."""
        node = self.node(name)
        self.client.containers.get(node.container).start()
        self._wait_engine(node, time.monotonic() + timeout_s)

    # ---- down ------------------------------------------------------------------------------

    def down(self) -> None:
        """Every container, volume and network of the lab, and its sockets' folder."""
        where = {"label": f"{LAB_LABEL}={self.prefix}"}
        for c in self.client.containers.list(all=True, filters=where):
            c.remove(force=True, v=True)
        for v in self.client.volumes.list(filters=where):
            v.remove(force=True)
        for n in self.client.networks.list(filters=where):
            n.remove()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.nodes = []
