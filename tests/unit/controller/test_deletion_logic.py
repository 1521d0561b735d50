"""Topic deletion's rules (controller.logic.deletion), step by step as Kafka 2.6's
TopicDeletionManagerTest walks them: testBasicDeletion, testDeletionWithBrokerOffline,
testBrokerFailureAfterDeletionStarted; and DeleteTopicTest's
testResumeDeleteTopicWithRecoveredFollower and testPartitionReassignmentDuringDeleteTopic."""

from __future__ import annotations

from controller.logic.deletion import ReplicaDeletion, TopicDeletions
from minibroker.core.types import TopicPartition

T0, T1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
REPLICAS = [(T0, 1), (T0, 2), (T0, 3), (T1, 1), (T1, 2), (T1, 3)]


def replicas_of(topic: str) -> list[tuple[TopicPartition, int]]:
    return [r for r in REPLICAS if r[0].topic == topic]


def online_of(brokers: set[int]):  # type: ignore[no-untyped-def]
    return lambda r: r[1] in brokers


def test_basic_deletion() -> None:
    d = TopicDeletions()
    d.enqueue({"foo"})
    plan = d.resume(replicas_of, online_of({1, 2, 3}))
    assert plan.offline == (T0, T1)  # UpdateMetadata with leader -2
    assert set(plan.stop) == set(REPLICAS)
    assert all(d.states[r] is ReplicaDeletion.STARTED for r in REPLICAS)
    # Nothing more while deletions are in flight.
    assert d.resume(replicas_of, online_of({1, 2, 3})).empty()
    d.succeed(REPLICAS)
    plan = d.resume(replicas_of, online_of({1, 2, 3}))
    assert plan.complete == ("foo",)
    assert not d.queued and not d.states


def test_deletion_with_broker_offline_waits_for_the_broker() -> None:
    d = TopicDeletions()
    d.enqueue({"foo"})
    plan = d.resume(replicas_of, online_of({1, 2}))
    assert plan.halted == ("foo",)
    assert {r for r in plan.stop} == {r for r in REPLICAS if r[1] != 3}
    assert d.states[(T0, 3)] is ReplicaDeletion.INELIGIBLE
    d.succeed([r for r in REPLICAS if r[1] != 3])
    plan = d.resume(replicas_of, online_of({1, 2}))
    assert not plan.complete and not plan.stop  # halted: broker 3 is still down
    # Broker 3 returns (onBrokerStartup -> resumeDeletionForTopics).
    d.resume_topics({"foo"})
    plan = d.resume(replicas_of, online_of({1, 2, 3}))
    assert set(plan.stop) == {(T0, 3), (T1, 3)}
    assert plan.offline == (T0, T1)  # leader -2 again, every round (onTopicDeletion)
    d.succeed([(T0, 3), (T1, 3)])
    assert d.resume(replicas_of, online_of({1, 2, 3})).complete == ("foo",)


def test_broker_failure_after_deletion_started() -> None:
    d = TopicDeletions()
    d.enqueue({"foo"})
    d.resume(replicas_of, online_of({1, 2, 3}))
    halted = d.fail([(T0, 2), (T1, 2)])  # broker 2 died before answering
    assert halted == {"foo"}
    d.succeed([r for r in REPLICAS if r[1] != 2])
    assert not d.resume(replicas_of, online_of({1, 3})).complete
    d.resume_topics({"foo"})
    plan = d.resume(replicas_of, online_of({1, 2, 3}))
    assert set(plan.stop) == {(T0, 2), (T1, 2)}


def test_a_failed_stop_replica_is_retried_once_the_topic_resumes() -> None:
    d = TopicDeletions()
    d.enqueue({"foo"})
    d.resume(replicas_of, online_of({1, 2, 3}))
    d.fail([(T0, 1)])
    d.succeed([r for r in REPLICAS if r != (T0, 1)])
    d.resume(replicas_of, online_of({1, 2, 3}))  # retry resets the failed replica
    assert (T0, 1) not in d.states
    d.resume_topics({"foo"})
    assert d.resume(replicas_of, online_of({1, 2, 3})).stop == ((T0, 1),)


def test_a_topic_being_reassigned_is_not_deleted_until_the_move_ends() -> None:
    d = TopicDeletions()
    d.enqueue({"foo"})
    d.halt({"foo"})  # a partition of it is being reassigned
    assert d.resume(replicas_of, online_of({1, 2, 3})).empty()
    d.resume_topics({"foo"})  # the reassignment completed
    assert d.resume(replicas_of, online_of({1, 2, 3})).stop


def test_disabled_deletion_queues_nothing() -> None:
    d = TopicDeletions(enabled=False)
    d.enqueue({"foo"})
    assert not d.is_queued("foo")
    assert d.resume(replicas_of, online_of({1, 2, 3})).empty()


def test_a_deleted_replica_stays_deleted_when_its_broker_dies() -> None:
    # ReplicaStateMachine: ReplicaDeletionIneligible only from OfflineReplica or Started, so
    # a broker's death after it deleted its replica does not hold the topic up.
    d = TopicDeletions()
    d.enqueue({"foo"})
    d.resume(replicas_of, online_of({1, 2, 3}))
    d.succeed(REPLICAS)
    assert d.fail([(T0, 3), (T1, 3)]) == set()
    assert d.resume(replicas_of, online_of({1, 2})).complete == ("foo",)


def test_only_a_started_replica_can_succeed() -> None:
    d = TopicDeletions()
    d.enqueue({"foo"})
    d.succeed(REPLICAS)  # an answer to a StopReplica never sent: ignored
    assert not d.states
