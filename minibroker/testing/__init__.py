"""minibroker for an application's tests: a replicated cluster of real processes started in
seconds (`Cluster`), faults by role resolved when applied (`leader_of`, `follower_of`,
`active_controller`, `coordinator_of`), waits on replication states that return the event
they waited for, and the cluster's event timeline as objects (docs/testing.md).

    from minibroker.testing import Cluster, leader_of

    with Cluster() as cluster:
        cluster.create_topic("orders", partitions=3)
        cluster.kill(leader_of("orders", 0))
        print(cluster.wait_for_new_leader("orders", 0))
"""

from minibroker.runtime.waiting import WaitTimeout
from minibroker.testing.cluster import Cluster
from minibroker.testing.faults import Action
from minibroker.testing.roles import Role, active_controller, coordinator_of, follower_of, leader_of
from minibroker.testing.timeline import Event
from minibroker.testing.views import PartitionState, ReplicaState

__all__ = [
    "Action",
    "Cluster",
    "Event",
    "PartitionState",
    "ReplicaState",
    "Role",
    "WaitTimeout",
    "active_controller",
    "coordinator_of",
    "follower_of",
    "leader_of",
]
