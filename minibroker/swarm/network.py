"""Network faults on a swarm task: iptables DROP rules in the task container's own network
namespace, written by the short-lived helper (minibroker-netfault:dev, on that node's engine)
that the compose backend uses for a cut from some peers (minibroker/chaos/compose_network.py).

A swarm task cannot be disconnected from the stack's overlay network (Swarm owns its
attachments), so every cut is rules, by address:
- a peer (a node, or a group: brokers, controllers, zookeeper): its overlay addresses, DROPped
  in the directions asked;
- `clients` (whatever reaches the task from outside the overlay: host-mode published ports):
  the overlay's own traffic is let through first, then everything to or from the task's own
  addresses is dropped;
- `all` (`isolate NODE`): everything to or from the task's own addresses; loopback (and Docker's
  resolver at 127.0.0.11) stays.
The task's own addresses are read in its namespace when the rules are written (`hostname -I`),
so the host-mode publishing interface Docker adds (docker_gwbridge) is among them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from minibroker.chaos.backend import ChaosError, NetworkFault
from minibroker.chaos.compose_network import CHAIN, ComposeNetwork, Engine, Member, named_peers

# Every address but loopback of the namespace the helper runs in (the task's); IPv6 ones are
# skipped (iptables is IPv4's).
_OWN = "$(hostname -I)"


def overlay_subnets(target: Member) -> list[str]:
    """The subnets of the stack networks `target` is attached to."""
    networks = (target.container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
    out = set()
    for n in networks.values():
        if n.get("IPAddress") and n.get("IPPrefixLen"):
            iface = ipaddress.ip_interface(f"{n['IPAddress']}/{n['IPPrefixLen']}")
            out.add(str(iface.network))
    return sorted(out)


def _own_address_rules(direction: str) -> list[str]:
    loop = []
    if direction in ("both", "in"):
        loop.append(f"iptables -w -A {CHAIN} -d $ip ! -s $ip -j DROP")
    if direction in ("both", "out"):
        loop.append(f"iptables -w -A {CHAIN} -s $ip ! -d $ip -j DROP")
    body = " && ".join(loop)
    return [f"for ip in {_OWN}; do case $ip in *:*) continue ;; esac; {body} || exit 1; done"]


def cut_rules(
    fault: NetworkFault, target: Member, others: Sequence[Member]
) -> tuple[list[str], list[str]]:
    """The shell lines that carry out a `cut` on `target`, and the link names cut."""
    if fault.kind != "cut":
        raise ChaosError(
            f"{fault.kind} needs the kernel's netem, which these machines lack; on a swarm "
            "only `isolate` (a cut) works. Delay and throttle work on a process-mode cluster "
            "started with `minibroker cluster up --proxy`"
        )
    named, outside = named_peers(fault, target, others)
    peers = sorted(named.items())
    rules = [*ComposeNetwork.chain_hooks()]
    for address in sorted({a for _, addrs in peers for a in addrs}):
        if fault.direction in ("both", "in"):
            rules.append(f"iptables -w -A {CHAIN} -s {address} -j DROP")
        if fault.direction in ("both", "out"):
            rules.append(f"iptables -w -A {CHAIN} -d {address} -j DROP")
    links = [f"{target.node.name}->{name}" for name, _ in peers]
    if outside:
        if "all" not in (fault.peers or ("all",)):
            # Only what comes from outside the overlay: its own traffic returns first.
            rules += [
                f"iptables -w -A {CHAIN} -s {net} -d {net} -j RETURN"
                for net in overlay_subnets(target)
            ]
        rules += _own_address_rules(fault.direction)
        links.append(f"{target.node.name}->clients")
    return rules, links


class SwarmNetwork:
    """Cuts and heals one task's links through the helper on its node's engine."""

    def __init__(self, client: object, stack: str, engine: Engine) -> None:
        self._helper = ComposeNetwork(client, stack, engine)

    def cut(self, fault: NetworkFault, target: Member, others: Sequence[Member]) -> list[str]:
        if target.container.status not in ("running", "paused"):
            raise ChaosError(f"{target.node.name} is not running ({target.container.status})")
        rules, links = cut_rules(fault, target, others)
        self._helper.iptables(target, rules)
        return links

    def heal(self, target: Member) -> list[str]:
        if target.container.status != "running":
            return []
        listing = self._helper.iptables(target, [f"iptables -w -S {CHAIN} 2>/dev/null || true"])
        drops = [line for line in listing.splitlines() if line.startswith(f"-A {CHAIN}")]
        if not drops:
            return []
        self._helper.iptables(target, [f"iptables -w -F {CHAIN}"])
        return [f"{target.node.name}: {len(drops)} iptables rule(s)"]
