"""What of a group `__consumer_offsets` keeps, and the group a new coordinator loads back from it
(GroupMetadataManager.groupMetadataValue / readGroupMessageValue, GroupMetadata.loadGroup): the
generation, protocol, leader and every member with its session, subscription and assignment.
A loaded group with members is Stable, its members' sessions starting at the load, so that a
coordinator moving does not make its members rebalance; one without members is Empty. Pure."""

from __future__ import annotations

from broker.groups.group import Group, GroupState, Member
from minibroker.core.coordinator_log.group_records import GroupValue, MemberValue
from minibroker.core.coordinator_log.schema import Reader, RecordFormatError

CONSUMER_PROTOCOL = "consumer"


def group_value(group: Group, assignments: dict[str, bytes], now_ms: int) -> GroupValue:
    """The record of `group` with these assignments (the leader's, being stored), its state's
    time `now_ms`."""
    protocol = group.protocol_name
    members = tuple(
        MemberValue(
            m.member_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(protocol) if protocol else b"",
            assignments.get(m.member_id, b""),
        )  # fmt: skip
        for m in group.members.values()
    )
    return GroupValue(
        group.protocol_type or "", group.generation_id, protocol, group.leader_id, now_ms, members
    )


def loaded_group(group_id: str, value: GroupValue, now_ms: int, initial_delay_ms: int) -> Group:
    protocol = value.protocol or ""
    members = {
        m.member_id: Member(
            m.member_id,
            m.client_id,
            m.client_host,
            m.session_timeout_ms,
            m.rebalance_timeout_ms,
            [(protocol, m.subscription)],
            now_ms,
            assignment=m.assignment,
        )  # fmt: skip
        for m in value.members
    }
    return Group(
        group_id,
        initial_delay_ms,
        state=GroupState.STABLE if members else GroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol if members else None,
        leader_id=value.leader if members else None,
        members=members,
    )


def subscribed_topics(group: Group) -> set[str] | None:
    """The topics a consumer group's members subscribe to (ConsumerProtocol subscriptions);
    None when they cannot be known (not the consumer protocol, no members, one unreadable)."""
    if group.protocol_type != CONSUMER_PROTOCOL or not group.members or not group.protocol_name:
        return None
    topics: set[str] = set()
    for m in group.members.values():
        try:
            topics |= _subscription_topics(m.metadata(group.protocol_name))
        except (RecordFormatError, StopIteration):
            return None
    return topics


def _subscription_topics(data: bytes) -> set[str]:
    """ConsumerProtocolSubscription v0-v1: version, the topics, then user data (and owned
    partitions) this needs not read."""
    r = Reader(data, "consumer subscription")
    r.int16()
    return {r.string() for _ in range(r.array_length())}
