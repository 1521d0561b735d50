"""Network faults between the containers of a compose cluster, on the real Docker engine.

Two ways to cut a node off, as the fault asks:
- from everything (`isolate NODE`, every peer, both ways): `docker network disconnect` from each
  of the project's networks. Its connections stall (nothing answers, nothing resets), the host's
  published ports reach nothing, and the name the others know it by stops resolving. Healing
  reconnects it with its service name as the alias, the way compose attached it; published
  ports come back with it.
- from some peers, or one way (`isolate broker-1 --from zookeeper`): iptables DROP rules in the
  node's own network namespace, in a chain of ours (MINIBROKER-CHAOS) hooked into INPUT and
  OUTPUT, written by a short-lived helper container (image minibroker-netfault:dev) that joins
  that namespace with NET_ADMIN. Packets to and from the peers' addresses vanish: the node still
  reaches everyone else. A broker cut from ZooKeeper this way is Kafka's ZooKeeper-era story:
  its session expires, the controller elects new leaders, and it keeps serving as the old leader
  until it learns the new epoch.

"clients" are the host's tools: published ports reach a container from the network's gateway.
Delay and throttle would need the kernel's netem, which these machines lack
(docs/notes.md); they stay process-mode faults (the loopback fault proxy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minibroker.chaos.backend import ChaosError, NetworkFault, Node
from minibroker.topology import NETFAULT_IMAGE

HELPER_IMAGE = NETFAULT_IMAGE
CHAIN = "MINIBROKER-CHAOS"
HELPER_LABEL = "minibroker.role"  # the helper is a "tool", which the chaos listing skips
_GROUPS = {"brokers": "broker", "controllers": "controller", "zookeeper": "zookeeper"}

Engine = Callable[[str, Callable[[], Any]], Any]


@dataclass(frozen=True)
class Member:
    """A node's container and where it sits on the project's networks."""

    node: Node
    container: Any  # docker.models.containers.Container
    service: str
    networks: frozenset[str]  # the project networks it is attached to, running or not
    addresses: dict[str, str]  # network name -> IPv4 address (while running)
    gateways: dict[str, str]  # network name -> the network's gateway (the host's side)


def member(node: Node, container: Any, service: str) -> Member:
    networks = (container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
    return Member(
        node,
        container,
        service,
        frozenset(networks),
        {name: n["IPAddress"] for name, n in networks.items() if n.get("IPAddress")},
        {name: n["Gateway"] for name, n in networks.items() if n.get("Gateway")},
    )


def named_peers(
    fault: NetworkFault, target: Member, others: Sequence[Member]
) -> tuple[dict[str, list[str]], bool]:
    """The nodes the fault names (by name or group: brokers, controllers, zookeeper, all) with
    their addresses, and whether it names what lies outside the nodes too (clients, all)."""
    wanted = fault.peers or ("all",)
    by_name = {m.node.name: m for m in others if m.node.name != target.node.name}
    out: dict[str, list[str]] = {}
    outside = False
    for peer in wanted:
        outside = outside or peer in ("clients", "all")
        if peer == "all":
            out |= {n: sorted(m.addresses.values()) for n, m in by_name.items()}
        elif peer in _GROUPS:
            out |= {
                n: sorted(m.addresses.values())
                for n, m in by_name.items()
                if m.node.role == _GROUPS[peer]
            }
        elif peer in by_name:
            out[peer] = sorted(by_name[peer].addresses.values())
        elif peer != "clients":
            have = ", ".join(sorted(by_name)) or "none"
            raise ChaosError(
                f"unknown peer {peer!r} for {target.node.name}: a node ({have}) or one of "
                f"brokers, controllers, zookeeper, clients, all"
            )
    return out, outside


class ComposeNetwork:
    """Cuts and heals the links of the nodes of one compose project; `engine(what, call)` runs
    a Docker SDK call and turns its errors into ChaosError."""

    def __init__(self, client: Any, project: str, engine: Engine) -> None:
        self._client = client
        self._project = project
        self._engine = engine

    def project_networks(self) -> list[Any]:
        found: list[Any] = self._engine(
            f"listing the networks of compose project {self._project!r}",
            lambda: self._client.networks.list(
                filters={"label": f"com.docker.compose.project={self._project}"}
            ),
        )
        return sorted(found, key=lambda n: n.name)

    # ---- cut ------------------------------------------------------------------------------

    def cut(self, fault: NetworkFault, target: Member, others: Sequence[Member]) -> list[str]:
        """Carry out a `cut` fault on `target`; the names of the links cut."""
        if fault.kind != "cut":
            raise ChaosError(
                f"{fault.kind} needs the kernel's netem, which a compose cluster here cannot "
                "use; on a compose cluster only `isolate` (a cut) works. Delay and throttle "
                "work on a process-mode cluster started with `minibroker cluster up --proxy`"
            )
        if target.container.status not in ("running", "paused"):
            raise ChaosError(f"{target.node.name} is not running ({target.container.status})")
        if not fault.peers and fault.direction == "both":
            return self._disconnect(target)
        peers = self._peers(fault, target, others)
        addresses = sorted({a for _, addrs in peers for a in addrs})
        if not addresses:
            raise ChaosError(f"no address to cut {target.node.name} from (are the peers up?)")
        rules = []
        for address in addresses:
            if fault.direction in ("both", "in"):
                rules.append(f"iptables -w -A {CHAIN} -s {address} -j DROP")
            if fault.direction in ("both", "out"):
                rules.append(f"iptables -w -A {CHAIN} -d {address} -j DROP")
        self.iptables(target, [*self.chain_hooks(), *rules])
        return [f"{target.node.name}->{name}" for name, _ in peers]

    def _peers(
        self, fault: NetworkFault, target: Member, others: Sequence[Member]
    ) -> list[tuple[str, list[str]]]:
        """(link end name, its addresses) for every peer the fault names; "clients" are the
        host's tools, reaching the container from its networks' gateways."""
        peers, outside = named_peers(fault, target, others)
        if outside:
            peers["clients"] = sorted(set(target.gateways.values()))
        return sorted(peers.items())

    def _disconnect(self, target: Member) -> list[str]:
        names = sorted(target.networks)
        for network in self.project_networks():
            if network.name in target.networks:
                self._engine(
                    f"disconnecting {target.container.name} from {network.name}",
                    functools.partial(network.disconnect, target.container),
                )
        return [f"{target.node.name}->all ({name})" for name in names]

    # ---- heal -----------------------------------------------------------------------------

    def heal(self, target: Member) -> list[str]:
        """Reconnect `target` to the project networks it left and drop our iptables rules;
        the links that had a fault."""
        healed = []
        for network in self.project_networks():
            if network.name in target.networks:
                continue
            self._engine(
                f"reconnecting {target.container.name} to {network.name}",
                functools.partial(network.connect, target.container, aliases=[target.service]),
            )
            healed.append(f"{target.node.name}->all ({network.name})")
        if target.container.status == "running":
            listing = self.iptables(target, [f"iptables -w -S {CHAIN} 2>/dev/null || true"])
            drops = [line for line in listing.splitlines() if line.startswith(f"-A {CHAIN}")]
            if drops:
                self.iptables(target, [f"iptables -w -F {CHAIN}"])
                healed.append(f"{target.node.name}: {len(drops)} iptables rule(s)")
        return healed

    # ---- the helper -----------------------------------------------------------------------

    @staticmethod
    def chain_hooks() -> list[str]:
        return [
            f"iptables -w -N {CHAIN} 2>/dev/null || true",
            *(
                f"iptables -w -C {hook} -j {CHAIN} 2>/dev/null "
                f"|| iptables -w -I {hook} 1 -j {CHAIN}"
                for hook in ("INPUT", "OUTPUT")
            ),
        ]

    def iptables(self, target: Member, commands: list[str]) -> str:
        """Run `commands` (sh, each must succeed) in `target`'s network namespace."""
        self._helper_image()
        script = " && ".join(f"( {c} )" for c in commands)
        out = self._engine(
            f"iptables in {target.container.name}'s network namespace",
            lambda: self._client.containers.run(
                HELPER_IMAGE,
                ["sh", "-c", script],
                network_mode=f"container:{target.container.id}",
                cap_add=["NET_ADMIN"],
                labels={HELPER_LABEL: "tool"},
                remove=True,
                stdout=True,
                stderr=True,
            ),
        )
        return out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out or "")

    def _helper_image(self) -> None:
        try:
            from docker.errors import ImageNotFound
        except ImportError:  # pragma: no cover - the backend imported docker already
            return
        try:
            self._client.images.get(HELPER_IMAGE)
        except ImageNotFound:
            raise ChaosError(
                f"network faults on a compose cluster need the image {HELPER_IMAGE} "
                "(iptables): build it with `bash deploy/build-images.sh`, or "
                "`docker compose -f deploy/docker-compose.yml --profile tools build`"
            ) from None
