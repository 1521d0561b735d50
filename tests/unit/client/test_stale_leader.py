"""A leader cut off from ZooKeeper keeps its old view: it times out acks=all writes and its
Metadata answers still name itself. The producer must learn the new leader from another broker
(reference §8.4 item 7: the old leader never acknowledges; clients move on by themselves)."""

from __future__ import annotations

from minibroker.client.metadata import refresh_candidates
from minibroker.client.record_metadata import RecordMetadata
from minibroker.rpc import broker_pb2
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.test_clients_on_fake_cluster import TP0, producer, run, send_all


def test_a_timed_out_leader_with_a_stale_view_is_not_asked_where_the_leader_is() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster, metadata_max_age_ms=600_000, delivery_timeout_ms=3000) as p:
            first = await send_all(p, [b"a"])
            # Broker 1 lost ZooKeeper: the controller moved the leadership, broker 1 never heard.
            view = await cluster._metadata(1, broker_pb2.MetadataRequest(topics=["t"]))
            cluster.stale_metadata[1] = view
            cluster.timing_out.add(1)
            cluster.move_leader(TP0, 2)
            return first + await send_all(p, [b"b"])

    assert [m.offset for m in run(main())] == [0, 1]
    produces = [a for a, m in cluster.calls if m == "Produce"]
    assert produces.count(cluster.addresses[1]) == 2  # the first record, and one timeout
    assert produces[-1] == cluster.addresses[2]


def test_refresh_asks_a_suspected_broker_after_the_others_and_before_failed_ones() -> None:
    known = ["b1", "b2", "b3"]
    order = refresh_candidates(known, ["b1"], {"b3": 5}, {}, suspect={"b1"})
    assert order == ["b2", "b1", "b3"]


def test_refresh_breaks_ties_from_a_rotating_start_as_kafkas_least_loaded_node() -> None:
    known = ["b1", "b2", "b3"]
    firsts = {refresh_candidates(known, [], {}, {}, start=s)[0] for s in range(3)}
    assert firsts == {"b1", "b2", "b3"}
