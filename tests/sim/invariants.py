"""The invariants, checked from outside after every event (the same list the real-process
scenario checker uses, issue 8 item 2):

1. acked-on-leader: every record acknowledged with acks=all, or read by a consumer, is at its
   offset on the current leader;
2. acked-on-isr: ... and on every live ISR member up to the leader's HW;
3. logs-identical: replicas' logs hold the same batches up to the smaller of their HWs, and a
   follower done truncating holds a prefix of its leader's log;
4. hw-monotonic: a leader's HW never decreases within an epoch (for one leader process);
5. consumer-below-hw: no consumer reads at or past the HW;
6. leader-in-isr, 7. epochs-grow, 8. one-leader-per-epoch, 9. isr-subset-of-replicas (in
   ZooKeeper and in every broker), plus one active controller per controller epoch;
10. isr-shrink-rule: a reference model of Kafka's shrink rule (§2.1, §2.4, §2.8), computed
   from the fetches the leader handled, must name the same replicas the leader removes. ISR
   membership only decides liveness (the HW protects every ISR member), so no safety
   invariant can see a wrong shrink rule; this one states what replica.lag.time.max.ms means.

A power loss drops unflushed bytes: Kafka acknowledges before fsync, so a batch that a power
loss removed from a replica is excused from 1-3, and so is any disagreement at an offset where
one side holds such a batch. That is wider than the lost batch itself on purpose: a leader
that lost data and restarts unnoticed (no controller saw it, e.g. during a controller
failover) is sent its old epoch again and writes new batches where its followers hold the
lost ones; within one epoch nothing repairs that (KIP-966's "unclean recovery"). The same
story is the only way to reach §4.5's "leader's log is shorter than mine" truncation, so
that is excused after a power loss on the partition and a violation without one.

Checks look only where the event could have changed something: an event runs on one node, so
after it only that node's partitions are examined, and only those whose fingerprint (log end,
HW, epoch, leadership, ISR, fetch phase) changed; relations between two replicas are checked
from whichever side changed. Acknowledgements are checked when they arrive, ZooKeeper states
when they are written. `paranoid=True` checks every partition after every event instead (the
tests run some seeds both ways).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from minibroker.core.types import LeaderAndIsr, TopicPartition
from tests.sim.kernel import Violation

if TYPE_CHECKING:
    from broker.replication.partition import ProposeIsr
    from tests.sim.broker import Hosted, SimBroker
    from tests.sim.runner import Cluster


@dataclass
class SpecReplica:
    """The reference model's view of one follower (Kafka's Replica, §2.1)."""

    leo: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    caught_up_ms: int = 0


class Checker:
    def __init__(self, cluster: Cluster, paranoid: bool = False) -> None:
        self.cluster = cluster
        self.paranoid = paranoid
        self.kernel = cluster.kernel
        self.assignments = dict(cluster.cfg.assignments)
        self.lag_ms = cluster.cfg.lag_ms
        self.committed: dict[TopicPartition, dict[int, int]] = {tp: {} for tp in self.assignments}
        self.excused: set[int] = set()
        self.power_touched: set[TopicPartition] = set()
        self.leader_hw: dict[tuple[TopicPartition, int, int, int], int] = {}
        self.epoch_leader: dict[tuple[TopicPartition, int], int] = {}
        self.current: dict[TopicPartition, tuple[int, int, int]] = {}  # epoch, broker, incarnation
        self.broker_epochs: dict[tuple[int, int, TopicPartition], int] = {}
        self.controllers: dict[int, int] = {}
        self.spec: dict[tuple[int, TopicPartition], dict[int, SpecReplica]] = {}
        self.stats = {"acked": 0, "consumed": 0, "leaders": 0, "power_losses": 0, "unclean": 0}

    # ---- hooks the simulated processes call ------------------------------------------------

    def on_make_leader(self, b: SimBroker, tp: TopicPartition, h: Hosted, was_leader: bool) -> None:
        p = h.partition
        epoch = p.leader_epoch
        self.stats["leaders"] += 1
        first = self.epoch_leader.setdefault((tp, epoch), b.id)
        if first != b.id:
            raise Violation(
                "one-leader-per-epoch", f"{tp} epoch {epoch}: broker {b.id} and broker {first}"
            )
        current_epoch, current_broker, _ = self.current.get(tp, (-1, 0, 0))
        if epoch > current_epoch or (epoch, b.id) == (current_epoch, current_broker):
            # A restarted leader can be sent its old epoch again by a controller that missed
            # the restart (a failover in between): it leads that epoch anew.
            self.current[tp] = (epoch, b.id, b.incarnation)
        now, leo = self.kernel.now, h.log.log_end_offset
        spec = self.spec.setdefault((b.id, tp), {})
        for f in self.assignments[tp]:
            if f == b.id:
                continue
            r = spec.setdefault(f, SpecReplica())
            r.last_fetch_leader_leo, r.last_fetch_ms = leo, now
            r.caught_up_ms = now if f in p.isr else 0
            if not was_leader:
                r.leo, r.last_fetch_leader_leo, r.last_fetch_ms = -1, -1, 0
        self._committed_on_leader(tp, b, h)

    def on_follower_fetch(
        self, b: SimBroker, tp: TopicPartition, follower: int, fetch_offset: int, leader_leo: int
    ) -> None:
        r = self.spec.get((b.id, tp), {}).get(follower)
        if r is None:
            return
        now = self.kernel.now
        if fetch_offset >= leader_leo:
            r.caught_up_ms = max(r.caught_up_ms, now)
        elif fetch_offset >= r.last_fetch_leader_leo:
            r.caught_up_ms = max(r.caught_up_ms, r.last_fetch_ms)
        r.leo, r.last_fetch_leader_leo, r.last_fetch_ms = fetch_offset, leader_leo, now

    def on_shrink_decision(
        self, b: SimBroker, tp: TopicPartition, h: Hosted, proposal: ProposeIsr | None
    ) -> None:
        now, leo = self.kernel.now, h.log.log_end_offset
        spec = self.spec.get((b.id, tp), {})
        expected = {
            f
            for f in h.partition.isr - {b.id}
            if f in spec and spec[f].leo != leo and now - spec[f].caught_up_ms > self.lag_ms
        }
        removed = set(proposal.changed) if proposal is not None else set()
        if removed != expected:
            raise Violation(
                "isr-shrink-rule",
                f"{tp} leader {b.id}: removed {sorted(removed)} but Kafka's rule removes "
                f"{sorted(expected)} (leader LEO {leo}, followers {spec})",
            )

    def on_ack(self, tp: TopicPartition, base: int, tokens: list[int]) -> None:
        self.stats["acked"] += len(tokens)
        self._commit(tp, base, tokens, "acknowledged")

    def on_consume(self, tp: TopicPartition, base: int, tokens: list[int], hw: int) -> None:
        if base + len(tokens) > hw:
            raise Violation(
                "consumer-below-hw", f"{tp}: read offsets {base}..{base + len(tokens) - 1}, HW {hw}"
            )
        self.stats["consumed"] += len(tokens)
        self._commit(tp, base, tokens, "consumed")

    def on_power_loss(self, broker: int, tp: TopicPartition, lost: list[int]) -> None:
        self.stats["power_losses"] += 1
        self.excused.update(lost)
        self.power_touched.add(tp)
        self.kernel.note(f"power loss on broker {broker}: {tp} lost {len(lost)} offsets")

    def on_unclean_truncation(
        self, b: SimBroker, tp: TopicPartition, leader: int, leader_leo: int
    ) -> None:
        """Follower `b` found the leader's log shorter than its own in one epoch (§4.5) and
        truncated to the leader's LEO; it fetches from there although a batch cut in the
        middle may leave it below that. Only a power loss can lead here."""
        if tp not in self.power_touched:
            raise Violation(
                "logs-identical",
                f"{tp}: follower {b.id} ahead of leader {leader} (LEO {leader_leo}) in one "
                "epoch, and no power loss ever touched this partition",
            )
        self.stats["unclean"] += 1
        lh = self.cluster.brokers[leader].hosted.get(tp)
        if lh is not None:
            self.excused.update(lh.shadow[len(b.hosted[tp].shadow) : leader_leo])

    def on_controller_active(self, controller: int, epoch: int) -> None:
        if self.controllers and epoch <= max(self.controllers):
            raise Violation("epochs-grow", f"controller {controller} active with old epoch {epoch}")
        self.controllers[epoch] = controller

    def on_zk_change(self, path: str, old: Any, new: Any) -> None:
        if not path.endswith("/state") or not isinstance(new, LeaderAndIsr):
            if path == "/controller_epoch" and old is not None and new is not None and new <= old:
                raise Violation("epochs-grow", f"/controller_epoch went from {old} to {new}")
            return
        tp = next(t for t in self.assignments if path.endswith(f"/{t.partition}/state"))
        where = f"{tp} in ZooKeeper: {new}"
        if new.leader >= 0 and new.leader not in new.isr:
            raise Violation("leader-in-isr", where)
        if not set(new.isr) <= set(self.assignments[tp]) or not new.isr:
            raise Violation("isr-subset-of-replicas", where)
        if isinstance(old, LeaderAndIsr):
            if new.leader_epoch < old.leader_epoch:
                raise Violation("epochs-grow", f"{where}, was {old}")
            if new.leader_epoch == old.leader_epoch and new.leader != old.leader:
                raise Violation("one-leader-per-epoch", f"{where}, was {old}")

    # ---- after every event ---------------------------------------------------------------

    def after_event(self, node: int) -> None:
        if self.paranoid:
            for every in self.cluster.brokers.values():
                if every.alive:
                    for tp, h in every.hosted.items():
                        self._check_local(every, tp, h)
                        self._check_relations(every, tp, h)
            return
        b = self.cluster.brokers.get(node)
        if b is None or not b.alive:
            return
        if len(b.hosted) < len(b.disk.shadows):
            # A restarted broker's logs before its first LeaderAndIsr: still ISR members.
            for tp in b.disk.shadows:
                cur = self.current_leader(tp) if tp not in b.hosted else None
                if cur is not None and b.id in cur[1].partition.isr:
                    self._acked_on_isr_member(tp, cur[0], cur[1], b.id)
        for tp, h in b.hosted.items():
            p = h.partition
            st = h.fetch
            fingerprint = (
                len(h.shadow),
                p.high_watermark,
                p.leader_epoch,
                p.leader_id,
                p.isr,
                p.isr_change_in_flight,
                st,
                st is not None and st.truncating,
            )
            if h.checked != fingerprint:
                h.checked = fingerprint
                self._check_local(b, tp, h)
                self._check_relations(b, tp, h)

    def _check_local(self, b: SimBroker, tp: TopicPartition, h: Hosted) -> None:
        p = h.partition
        if len(h.shadow) != h.log.log_end_offset:
            raise AssertionError(f"broker {b.id} {tp}: shadow out of step with the log")
        if not p.isr <= set(p.assignment):
            raise Violation("isr-subset-of-replicas", f"broker {b.id} {tp}: ISR {sorted(p.isr)}")
        key = (b.id, b.incarnation, tp)
        if p.leader_epoch < self.broker_epochs.get(key, -1):
            raise Violation("epochs-grow", f"broker {b.id} {tp}: epoch went down")
        self.broker_epochs[key] = p.leader_epoch
        if not p.is_leader:
            return
        if b.id not in p.isr:
            raise Violation("leader-in-isr", f"broker {b.id} leads {tp} with ISR {sorted(p.isr)}")
        # Per leader process: a restart that no controller noticed (it happened during a
        # controller failover) can lead the same epoch again from the checkpointed HW.
        hw_key = (tp, p.leader_epoch, b.id, b.incarnation)
        if p.high_watermark < self.leader_hw.get(hw_key, 0):
            raise Violation(
                "hw-monotonic",
                f"{tp} leader {b.id} epoch {p.leader_epoch}: HW {p.high_watermark} after "
                f"{self.leader_hw[hw_key]}",
            )
        self.leader_hw[hw_key] = p.high_watermark

    def current_leader(self, tp: TopicPartition) -> tuple[SimBroker, Hosted] | None:
        entry = self.current.get(tp)
        if entry is None:
            return None
        epoch, bid, incarnation = entry
        b = self.cluster.brokers[bid]
        h = b.hosted.get(tp) if b.alive and b.incarnation == incarnation else None
        if h is None or not h.partition.is_leader or h.partition.leader_epoch != epoch:
            return None
        return b, h

    def _check_relations(self, b: SimBroker, tp: TopicPartition, h: Hosted) -> None:
        cur = self.current_leader(tp)
        if cur is not None:
            leader, lh = cur
            isr = lh.partition.isr
            if leader is b:
                for f in sorted(isr - {b.id}):
                    self._acked_on_isr_member(tp, leader, lh, f)
            elif b.id in isr:
                self._acked_on_isr_member(tp, leader, lh, b.id)
            st = h.fetch
            following = st is not None and not st.truncating and st.leader == leader.id
            if following and st is not None and st.leader_epoch == lh.partition.leader_epoch:
                # Done truncating against the current leader: a prefix of its log.
                mine = h.shadow
                if lh.shadow[: len(mine)] != mine:
                    self._diverged(tp, leader, lh.shadow, b, mine, len(mine), "prefix")
        hw = h.partition.high_watermark
        for other_id in self.assignments[tp]:
            other = self.cluster.brokers[other_id]
            oh = other.hosted.get(tp) if other is not b and other.alive else None
            if oh is None:
                continue
            k = min(hw, oh.partition.high_watermark)
            if h.shadow[:k] != oh.shadow[:k]:
                self._diverged(tp, b, h.shadow, other, oh.shadow, k, "below the HW")

    def _diverged(
        self,
        tp: TopicPartition,
        a: SimBroker,
        sa: list[int],
        b: SimBroker,
        sb: list[int],
        upto: int,
        what: str,
    ) -> None:
        for o in range(min(upto, len(sa), len(sb))):
            if sa[o] != sb[o] and sa[o] not in self.excused and sb[o] not in self.excused:
                raise Violation(
                    "logs-identical",
                    f"{tp} offset {o} ({what}, up to {upto}): broker {a.id} holds batch "
                    f"{sa[o]:#x}, broker {b.id} holds {sb[o]:#x}",
                )

    def _acked_on_isr_member(
        self, tp: TopicPartition, leader: SimBroker, lh: Hosted, f: int
    ) -> None:
        fb = self.cluster.brokers[f]
        if not fb.alive:
            return
        shadow = fb.disk.shadows.get(tp, [])
        hw = lh.partition.high_watermark
        if len(shadow) >= hw:
            return
        committed = self.committed[tp]
        for o in range(len(shadow), hw):
            token = committed.get(o)
            if token is not None and token not in self.excused:
                raise Violation(
                    "acked-on-isr",
                    f"{tp} offset {o}: ISR member {f} of leader {leader.id} (epoch "
                    f"{lh.partition.leader_epoch}, HW {hw}) has log end {len(shadow)}",
                )

    # ---- committed records -----------------------------------------------------------------

    def _commit(self, tp: TopicPartition, base: int, tokens: list[int], how: str) -> None:
        committed = self.committed[tp]
        for i, token in enumerate(tokens):
            o = base + i
            before = committed.get(o)
            changed = before is not None and before != token
            if changed and before not in self.excused and token not in self.excused:
                raise Violation(
                    "acked-on-leader",
                    f"{tp} offset {o}: {how} batch {token:#x}, but {before:#x} was "
                    "committed there before",
                )
            committed[o] = token
        cur = self.current_leader(tp)
        if cur is not None:
            # The leader's log only grows while it leads (it was checked whole when it became
            # leader), so only the new offsets need a look; an ISR member may have been short
            # of them already, before they were known to be committed.
            leader, lh = cur
            self._committed_on_leader(tp, leader, lh, offsets=range(base, base + len(tokens)))
            for f in sorted(lh.partition.isr - {leader.id}):
                self._acked_on_isr_member(tp, leader, lh, f)

    def _committed_on_leader(
        self, tp: TopicPartition, b: SimBroker, h: Hosted, offsets: range | None = None
    ) -> None:
        shadow, n = h.shadow, len(h.shadow)
        committed = self.committed[tp]
        items = committed.items() if offsets is None else ((o, committed[o]) for o in offsets)
        excused = self.excused
        for o, token in items:
            if o < n and (shadow[o] == token or shadow[o] in excused):
                continue
            if token not in excused:
                held = hex(shadow[o]) if o < n else "nothing"
                raise Violation(
                    "acked-on-leader",
                    f"{tp} offset {o}: committed batch {token:#x}, but leader {b.id} (epoch "
                    f"{h.partition.leader_epoch}) holds {held}",
                )
