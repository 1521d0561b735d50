"""An application's own client history, recorded and checked as Jepsen's Kafka "queue"
workload checks one, independently of the brokers (docs/testing.md, "Checking your clients'
history").

    from minibroker.history import HistoryRecorder, check

    recorder = HistoryRecorder()
    producer = recorder.producer(cluster.confluent_config(acks="all"))
    ...
    result = check(recorder.history(), timeline=cluster.events())
    assert result.ok, result.text()
"""

from minibroker.history.check import AT_LEAST_ONCE, EXACTLY_ONCE, CheckResult, check
from minibroker.history.model import Assign, ClientHistory, Commit, Idle, Read, Send, Txn
from minibroker.history.recorder import HistoryRecorder, load
from minibroker.history.rules import Anomaly

__all__ = [
    "AT_LEAST_ONCE",
    "EXACTLY_ONCE",
    "Anomaly",
    "Assign",
    "CheckResult",
    "ClientHistory",
    "Commit",
    "HistoryRecorder",
    "Idle",
    "Read",
    "Send",
    "Txn",
    "check",
    "load",
]
