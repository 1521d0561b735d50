"""A swarm of several machines on one: each node a container of
minibroker-swarm-node:dev (deploy/swarm: Debian's Docker Engine inside) with its own engine,
joined into one swarm (the first node its manager), the project's images loaded into every
engine with `docker save | docker load` (no registry), and the node labels deploy/stack.yml
places ZooKeeper, the brokers and the controllers by: node-N runs broker-N, node-1 ZooKeeper
too, node-2 and node-3 controller-1 and controller-2.

The host reaches each engine at a unix socket bind-mounted from the node
(`<dir>/node-N/docker.sock`): `docker -H unix://...` as `docker -H ssh://machine` on real
machines. A whole machine dies by `docker kill` of its node container (its engine and every
container on it with it) and comes back by `docker start` (the engine's data is in a volume).

    lab = SwarmLab("mbswarm").up()      # three nodes, a swarm, images loaded, labels set
    lab.nodes[1].docker_host            # unix:///tmp/mbswarm-.../node-2/docker.sock
    lab.down()                          # containers, volumes, network, sockets: all gone
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker import topology as t
from minibroker.chaos.compose import DEFAULT_SOCKET
from minibroker.chaos.compose_network import CHAIN, ComposeNetwork
from minibroker.localcluster import ClusterError
from minibroker.swarm.access import ENGINES_VARIABLE, SwarmAccess

NODE_IMAGE = "minibroker-swarm-node:dev"
LAB_LABEL = "org.minibroker.swarm-lab"  # on every container, volume and network of a lab
LAB_VARIABLE = "MINIBROKER_SWARM_LAB"  # the lab `minibroker swarm lab ...` acts on
DEFAULT_PREFIX = "mbswarm"
STACK_IMAGES = (t.RUNTIME_IMAGE, t.ZOOKEEPER_IMAGE, t.NETFAULT_IMAGE)
HOST_ENGINE = DEFAULT_SOCKET  # this machine's engine: the lab's machines are its containers
BOOTS = 3  # attempts at starting a killed machine again
REJOIN_S = 45.0  # a started machine's engine, until the swarm has it Ready again
SOCKET_MOUNT = "/run/minibroker-node"  # where a node's engine puts its docker.sock
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


def host_engine() -> Any:
    """This machine's own engine, where the lab's machines run: never $DOCKER_HOST, which the
    lab's exports point at its manager."""
    import docker

    client = docker.DockerClient(base_url=HOST_ENGINE)
    client.ping()
    return client


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
        prefix: str = DEFAULT_PREFIX,
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
        self.client = client if client is not None else host_engine()
        self.dir: Path | None = None
        self.nodes: list[LabNode] = []

    @property
    def network(self) -> str:
        return f"{self.prefix}-net"

    def container_name(self, index: int) -> str:
        return f"{self.prefix}-node-{index}"

    # ---- up --------------------------------------------------------------------------------

    def up(self, timeout_s: float = 180, *, form: bool = True) -> SwarmLab:
        """Start the machines; with `form`, also the swarm, its labels and the images (without:
        bare engines, for deploy/SWARM.md's own commands)."""
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
            if form:
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
                ["docker", "-H", HOST_ENGINE, "run", "-d", "--name", self.container_name(i),
                 "--hostname", name,
                 "--label", f"{LAB_LABEL}={self.prefix}", "--network", self.network,
                 "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--device", "/dev/fuse",
                 "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
                 "--security-opt", "systempaths=unconfined",
                 "-e", f"NODE_STORAGE_DRIVER={self.storage_driver}", "-e", f"NODE_MTU={MTU}",
                 "-v", f"{volume}:/var/lib/docker", "-v", f"{sockets}:{SOCKET_MOUNT}",
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
            # controller-1 on node-2, controller-2 on node-3 (deploy/SWARM.md): never together.
            if 2 <= i <= t.DEFAULT_CONTROLLERS + 1:
                labels.append(f"minibroker.controller-{i - 1}=true")
            for label in labels:
                docker(manager, "node", "update", "--label-add", label, node.name)

    def _load_images(self) -> None:
        """The project's images into every engine (no registry): one `docker save` to a file,
        one `docker load` a node."""
        assert self.dir is not None
        archive = self.dir / "images.tar"
        saved = subprocess.run(
            ["docker", "-H", HOST_ENGINE, "save", "-o", str(archive), *self.images],
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

    def attach(self) -> SwarmLab:
        """The nodes of a lab already up (started by another process), by its label."""
        found = self.client.containers.list(
            all=True, filters={"label": f"{LAB_LABEL}={self.prefix}"}
        )
        if not found:
            raise ClusterError(f"no swarm lab {self.prefix!r} here: `minibroker swarm lab up`")
        nodes = []
        for c in sorted(found, key=lambda c: c.name):
            sockets = next(
                m["Source"] for m in c.attrs["Mounts"] if m["Destination"] == SOCKET_MOUNT
            )
            address = (c.attrs["NetworkSettings"]["Networks"].get(self.network) or {}).get(
                "IPAddress", ""
            )
            nodes.append(LabNode(c.attrs["Config"]["Hostname"], c.name, address, Path(sockets)))
        self.nodes = sorted(nodes, key=lambda n: int(n.name.rsplit("-", 1)[1]))
        self.dir = self.nodes[0].socket_dir.parent
        return self

    def access(self) -> SwarmAccess:
        """The manager (node-1) and every node's engine, as the CLI takes them."""
        return SwarmAccess(self.nodes[0].docker_host, {n.name: n.docker_host for n in self.nodes})

    def variables(self) -> dict[str, str]:
        """What every later command needs, by deploy/SWARM.md's names: the manager and every
        node's engine (SwarmAccess), each node's engine and address (NODE1, ADDR1, ...),
        ZooKeeper's address, and the address each broker advertises outside the swarm."""
        access = self.access()
        out = {
            "DOCKER_HOST": access.manager,
            ENGINES_VARIABLE: ",".join(f"{k}={v}" for k, v in sorted(access.engines.items())),
        }
        for i, n in enumerate(self.nodes, start=1):
            out |= {f"NODE{i}": n.docker_host, f"ADDR{i}": n.address}
        out["MINIBROKER_ZK"] = f"{self.nodes[0].address}:{t.ZOOKEEPER_PORT}"
        out[LAB_VARIABLE] = self.prefix  # `minibroker swarm lab kill node-2` finds this lab
        for i in range(1, min(t.DEFAULT_BROKERS, len(self.nodes)) + 1):
            out[t.host_variable(f"broker-{i}")] = self.nodes[i - 1].address
        return out

    def exports(self) -> str:
        """variables() as shell lines (`eval "$(minibroker swarm lab up)"`)."""
        return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in self.variables().items())

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
        deadline = time.monotonic() + timeout_s
        for boot in range(1, BOOTS + 1):
            container = self.client.containers.get(node.container)
            if boot == 1:
                container.start()
            else:
                container.restart(timeout=10)
            try:
                self._wait_engine(node, deadline)
                self._wait_ready(node, min(deadline, time.monotonic() + REJOIN_S))
                return
            except ClusterError:
                # Seen once in ~10 restarts each (docs/notes.md): the engine exits at boot with
                # "bind: address already in use" on its socket; or it runs and believes itself
                # in the swarm while the manager keeps it Down. A machine that does not come
                # back is powered on again, as an operator would.
                if boot == BOOTS or time.monotonic() > deadline:
                    raise

    def _wait_ready(self, node: LabNode, deadline: float) -> None:
        """Until the swarm's manager has the machine Ready again (if it is in a swarm)."""
        state = docker(node, "info", "--format", "{{.Swarm.LocalNodeState}}").strip()
        if state != "active":
            return
        manager = self.nodes[0]
        while True:
            # check=False: a manager that is itself coming back answers with an error a while
            listing = docker(
                manager, "node", "ls", "--format", "{{.Hostname}} {{.Status}}", check=False
            )
            status = dict(line.split(maxsplit=1) for line in listing.splitlines() if " " in line)
            if status.get(node.name) == "Ready":
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"{node.name}'s engine runs but the swarm has it {status}")
            time.sleep(1)

    def cut_node(self, name: str) -> list[str]:
        """The machine is cut from the other machines (the host, where clients run, still
        reaches it): DROP rules for their addresses in the node container's own namespace,
        which carries its engine's swarm, gossip and overlay (VXLAN) traffic."""
        node = self.node(name)
        others = [n for n in self.nodes if n.name != name]
        rules = [
            f"iptables -w -A {CHAIN} -{side} {n.address} -j DROP"
            for n in others
            for side in ("s", "d")
        ]
        self._iptables(node, [*ComposeNetwork.chain_hooks(), *rules])
        return [f"{name}->{n.name}" for n in others]

    def heal_node(self, name: str) -> None:
        self._iptables(self.node(name), [f"iptables -w -F {CHAIN} 2>/dev/null || true"])

    def _iptables(self, node: LabNode, commands: list[str]) -> None:
        script = " && ".join(f"( {c} )" for c in commands)
        self.client.containers.run(
            t.NETFAULT_IMAGE, ["sh", "-c", script], network_mode=f"container:{node.container}",
            cap_add=["NET_ADMIN"], labels={LAB_LABEL: self.prefix}, remove=True,
        )  # fmt: skip

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
