"""How `minibroker events` prints one event: time, process, then a sentence for the events that
tell the replication story (ISR shrink/expand, isr_change nodes, UpdateMetadata, elections),
and `key=value` fields for the rest. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from minibroker.core.event_kinds import is_routine_event

Event = dict[str, Any]
_FIXED = ("ts", "level", "proc", "event")


def is_routine(event: Event) -> bool:
    """A per-request HW move: shown with --all or --event hw_advanced (minibroker.core's rule;
    HW moves caused by an ISR change are part of the story and always shown)."""
    return is_routine_event(event.get("event"), event.get("cause"))


def clock(ts_ms: int) -> str:
    """Local wall-clock time with milliseconds, e.g. 12:00:04.107."""
    return datetime.fromtimestamp(ts_ms / 1000).strftime("%H:%M:%S.%f")[:-3]


def _ids(values: Any) -> str:
    return "[" + ",".join(str(v) for v in values) + "]" if isinstance(values, list) else str(values)


def _node(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _caught_up(event: Event) -> str:
    times = event.get("last_caught_up_ms") or {}
    ts = int(event.get("ts", 0))
    parts = [
        f"broker {b} last caught up {clock(int(t))}, {(ts - int(t)) / 1000:.1f} s before"
        for b, t in sorted(times.items())
        if t
    ]
    return "; ".join(parts)


def _isr_change(event: Event) -> str:
    kind = str(event["event"]).removeprefix("isr_")
    verb = {"shrink": "ISR shrink", "expand": "ISR expand"}.get(kind, f"ISR {kind}")
    text = f"{verb} {event.get('tp')} {_ids(event.get('old_isr', '?'))}→{_ids(event.get('isr'))}"
    why = _caught_up(event) if kind.startswith("shrink") else ""
    return f"{text} ({why})" if why else text


def _request_sent(event: Event) -> str:
    kind = event.get("request")
    what = f"{kind} → broker {event.get('broker')}"
    if kind == "UpdateMetadata":
        what += f" (live brokers {_ids(event.get('live_brokers', []))})"
    elif event.get("partitions"):
        what += f" {_ids(event['partitions'])}"
    error = event.get("error")
    return what if error in (None, "NONE") else f"{what}: {error}"


def _producer(event: Event) -> str:
    """ " (producer P, epoch E)" when the event names them."""
    if event.get("producer_id") is None:
        return ""
    return f" (producer {event.get('producer_id')}, epoch {event.get('epoch')})"


_SENTENCES: dict[str, Callable[[Event], str]] = {
    "isr_shrink": _isr_change,
    "isr_expand": _isr_change,
    "isr_shrink_failed": _isr_change,
    "isr_expand_failed": _isr_change,
    "isr_change_notification_created": lambda e: (
        f"{_node(str(e.get('path', '')))} written for {_ids(e.get('partitions', []))}"
    ),
    "isr_change_processed": lambda e: (
        f"controller read {_ids(e.get('nodes', []))}: ISR now {_ids(e.get('partitions', []))}"
    ),
    "update_metadata_propagated": lambda e: (
        f"UpdateMetadata to {','.join(str(b) for b in e.get('brokers', []))} in "
        f"{e.get('took_ms')} ms after {_ids(e.get('nodes', []))}"
        + (f" (no answer from {_ids(e['not_answered'])})" if e.get("not_answered") else "")
    ),
    "leader_elected": lambda e: (
        f"leader of {e.get('tp')} is {e.get('leader')} (epoch {e.get('leader_epoch')}, "
        f"ISR {_ids(e.get('isr', []))}, {e.get('strategy')})"
    ),
    "became_leader": lambda e: (
        f"leads {e.get('tp')} at epoch {e.get('leader_epoch')}, ISR {_ids(e.get('isr', []))}, "
        f"HW {e.get('high_watermark')}"
    ),
    "became_follower": lambda e: f"follows {e.get('leader')} for {e.get('tp')}",
    "controller_elected": lambda e: (
        f"controller {e.get('controller_id')} elected (controller epoch {e.get('epoch')})"
    ),
    "broker_change": lambda e: (
        f"brokers changed: new {_ids(e.get('new', []))}, dead {_ids(e.get('dead', []))}"
        + (f", bounced {_ids(e['bounced'])}" if e.get("bounced") else "")
    ),
    "hw_advanced": lambda e: f"HW {e.get('tp')} → {e.get('high_watermark')} ({e.get('cause')})",
    "request_sent": _request_sent,
    # Operations (issue 26): reassignment, deletion, more partitions, configs.
    "reassignment_started": lambda e: (
        f"reassigning {e.get('tp')}: {_ids(e.get('origin', []))} → {_ids(e.get('target', []))} "
        f"(replicas {_ids(e.get('replicas', []))}, adding {_ids(e.get('adding', []))}, "
        f"removing {_ids(e.get('removing', []))})"
    ),
    "reassignment_cancelled": lambda e: (
        f"reassignment of {e.get('tp')} cancelled: back to {_ids(e.get('replicas', []))}"
    ),
    "replica_added": lambda e: (
        f"replica {e.get('replica')} of {e.get('tp')} started outside the ISR"
        + ("" if e.get("online", True) else " (its broker is down: the move waits)")
    ),
    "reassignment_caught_up": lambda e: (
        f"target {_ids(e.get('target', []))} of {e.get('tp')} all in the ISR "
        f"{_ids(e.get('isr', []))}"
    ),
    "replica_removed": lambda e: f"replica {e.get('replica')} of {e.get('tp')} removed",
    "reassignment_completed": lambda e: (
        f"{e.get('tp')} now on {_ids(e.get('replicas', []))}, leader {e.get('leader')}, "
        f"ISR {_ids(e.get('isr') or [])}"
    ),
    "topic_deletion_started": lambda e: f"deleting {_ids(e.get('topics', []))}",
    "topic_deletion_halted": lambda e: (
        f"deletion of {_ids(e.get('topics', []))} waits: {e.get('reason')}"
    ),
    "topic_deleted": lambda e: f"topic {e.get('topic')} deleted ({e.get('partitions')} partitions)",
    "partitions_added": lambda e: (
        f"{e.get('topic')} grows to {e.get('total')} partitions: "
        + ", ".join(f"{p} on {_ids(r)}" for p, r in (e.get("partitions") or {}).items())
    ),
    "topic_auto_created": lambda e: (
        f"topic {e.get('topic')} created on first use ({e.get('partitions')} partitions, "
        f"RF {e.get('replication_factor')})"
    ),
    "config_changed": lambda e: (
        f"{e.get('entity_type')}/{e.get('entity_name')} config: "
        + (
            ", ".join(
                f"{k} {_config_value(v[0])}→{_config_value(v[1])}"
                for k, v in (e.get("changed") or {}).items()
            )
            or "applied"
        )
    ),
    # Logs that live for days (issue 27): retention, DeleteRecords, the log start offset.
    "segments_deleted": lambda e: (
        f"{e.get('tp')} ({e.get('role')}): deleted segments {_ids(e.get('segments', []))}, "
        f"{e.get('bytes')} bytes ({'; '.join(e.get('reasons') or [])}); log start offset "
        f"{e.get('previous_log_start_offset')} → {e.get('log_start_offset')}"
        + (" (rolled first)" if e.get("rolled") else "")
    ),
    "records_deleted": lambda e: (
        f"records of {e.get('tp')} before {e.get('log_start_offset')} deleted (DeleteRecords): "
        f"log start offset {e.get('previous_log_start_offset')} → {e.get('log_start_offset')}"
    ),
    "log_start_offset_moved": lambda e: (
        f"{e.get('tp')}: log start offset {e.get('previous_log_start_offset')} → "
        f"{e.get('log_start_offset')} (from the {e.get('cause')})"
    ),
    # Exactly-once (issue 29): coordinators moving with their partitions, transactions.
    "group_partition_loaded": lambda e: (
        f"group coordinator for {e.get('tp')}: {e.get('groups')} groups, {e.get('offsets')} "
        f"committed offsets loaded in {e.get('ms')} ms"
    ),
    "group_partition_unloaded": lambda e: f"no longer the group coordinator for {e.get('tp')}",
    "txn_partition_loaded": lambda e: (
        f"transaction coordinator for {e.get('tp')} (coordinator epoch "
        f"{e.get('coordinator_epoch')}): {e.get('transactional_ids')} transactional ids, "
        f"{e.get('unfinished')} decided transactions to finish"
    ),
    "txn_partition_unloaded": lambda e: f"no longer the transaction coordinator for {e.get('tp')}",
    "txn_producer_initialized": lambda e: (
        f"{e.get('transactional_id')}: producer {e.get('producer_id')} at epoch {e.get('epoch')}"
    ),
    "txn_started": lambda e: (
        f"{e.get('transactional_id')}: transaction started (producer {e.get('producer_id')}, "
        f"epoch {e.get('epoch')})"
    ),
    "txn_committed": lambda e: (
        f"{e.get('transactional_id')}: committed on {e.get('partitions')} partitions"
        + _producer(e)
        + (f" ({e['error']})" if e.get("error") else "")
    ),
    "txn_aborted": lambda e: (
        f"{e.get('transactional_id')}: aborted on {e.get('partitions')} partitions"
        + _producer(e)
        + (f" ({e['error']})" if e.get("error") else "")
    ),
    "txn_verification_refused": lambda e: (
        f"{e.get('tp')}: refused a transactional batch of {e.get('transactional_id')} (producer "
        f"{e.get('producer_id')}, epoch {e.get('epoch')}): the coordinator answered "
        f"{e.get('coordinator_error')}, the producer gets {e.get('error')} (KIP-890 verification)"
    ),
    "txn_fenced": lambda e: (
        f"{e.get('transactional_id')}: producer {e.get('producer_id')} fenced at epoch "
        f"{e.get('epoch')} (a new instance; its open transaction aborted)"
    ),
    "txn_timed_out": lambda e: (
        f"{e.get('transactional_id')}: open past its timeout, aborted and fenced at epoch "
        f"{e.get('epoch')}"
    ),
    "txn_id_expired": lambda e: f"{e.get('transactional_id')}: expired and removed",
}


def _config_value(value: object) -> str:
    """A config value as a reader wants it: Long.MAX_VALUE (a throttle's rate when none is
    set, ConfigDef's default) is "unlimited", an empty one "(unset)"."""
    if value in ("", None):
        return "(unset)"
    return "unlimited" if str(value) == str(2**63 - 1) else str(value)


# The events that tell the replication story, for views that show it alone (the dashboard's
# timeline by default): the ones with a sentence, and the faults and turns around them.
STORY_EVENTS = frozenset(_SENTENCES) - {"hw_advanced", "request_sent", "log_start_offset_moved"} | {
    "zk_session_expired",
    "broker_registered",
    "broker_stopped",
    "controlled_shutdown",
    "controlled_shutdown_succeeded",
    "replica_removed_from_isr",
    "controller_resigned",
    "follower_truncated",
    "net_fault",
    "net_heal",
    "log_recovered",
}


def is_story(event: Event) -> bool:
    """Part of the replication story (STORY_EVENTS), or an HW move an ISR change caused."""
    name = event.get("event")
    return name in STORY_EVENTS or (name == "hw_advanced" and not is_routine(event))


def _fields(event: Event) -> str:
    return " ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}"
        for k, v in event.items()
        if k not in _FIXED
    )


def sentence(event: Event) -> str:
    """What the event says, in words (or as its fields when it has no sentence)."""
    say = _SENTENCES.get(str(event.get("event")))
    return say(event) if say is not None else _fields(event)


def render(event: Event) -> str:
    """One line: time, process, event name, then its sentence (or fields)."""
    text = sentence(event)
    when = clock(int(event.get("ts", 0)))
    return f"{when} {event.get('proc', '?'):<14} {event.get('event', '?'):<28} {text}".rstrip()


_SINCE = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_since(text: str, now_ms: int) -> int:
    """Epoch ms from "90s", "5m", "1h" (ago), epoch ms, "HH:MM[:SS]" (today, local time) or an
    ISO date-time; ValueError with the accepted forms otherwise."""
    text = text.strip()
    m = _SINCE.fullmatch(text)
    if m is not None:
        return now_ms - int(float(m["n"]) * _UNIT_MS[m["unit"]])
    if text.isdigit():
        return int(text)
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?", text):
            today = datetime.fromtimestamp(now_ms / 1000).date().isoformat()
            return int(datetime.fromisoformat(f"{today}T{text}").timestamp() * 1000)
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(
            f"--since {text!r}: give a duration ago (90s, 5m, 1h), HH:MM[:SS], "
            "an ISO date-time or epoch milliseconds"
        ) from None
