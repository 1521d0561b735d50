"""minibroker/rpc/ must be exactly what proto/ generates (`python scripts/gen_proto.py`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_grpc_code_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_services_have_the_v1_api() -> None:
    from minibroker.rpc import broker_pb2, control_pb2

    broker = broker_pb2.DESCRIPTOR.services_by_name["Broker"]
    assert {m.name for m in broker.methods} >= {
        "Produce",
        "Fetch",
        "ListOffsets",
        "Metadata",
        "OffsetsForLeaderEpoch",
    }
    control = control_pb2.DESCRIPTOR.services_by_name["Control"]
    assert {m.name for m in control.methods} == {
        "LeaderAndIsr",
        "UpdateMetadata",
        "StopReplica",
        "ControlledShutdown",
        "AlterPartitionReassignments",
        "ListPartitionReassignments",
        "ElectLeaders",
    }
    assert broker.full_name == "minibroker.v1.Broker"


def test_kafka_minus_one_defaults_are_optional_fields() -> None:
    from minibroker.rpc import broker_pb2

    # proto3 would otherwise read an unset replica_id as broker 0 (reference §3.7: -1 = consumer)
    req = broker_pb2.FetchRequest()
    assert not req.HasField("replica_id")
    part = broker_pb2.FetchPartition()
    assert not part.HasField("current_leader_epoch")
