"""The broker's log directory and its meta.properties (Kafka's BrokerMetadataCheckpoint).

A log dir written by one broker id must not be opened by another: Kafka refuses to start
(InconsistentBrokerIdException), and so do we.
"""

from __future__ import annotations

import os
from pathlib import Path

from minibroker.runtime.settings import parse_properties


class InconsistentBrokerId(RuntimeError):
    pass


def prepare_log_dir(log_dir: Path, broker_id: int, cluster_id: str) -> None:
    """Create the log dir, or check that it belongs to this broker and cluster."""
    log_dir.mkdir(parents=True, exist_ok=True)
    meta = log_dir / "meta.properties"
    if meta.exists():
        props = parse_properties(meta.read_text(encoding="utf-8"))
        if props.get("broker.id") not in (None, str(broker_id)):
            raise InconsistentBrokerId(
                f"{meta} says broker.id={props['broker.id']}, but this is broker {broker_id}"
            )
        if props.get("cluster.id") not in (None, cluster_id):
            raise InconsistentBrokerId(
                f"{meta} belongs to cluster {props['cluster.id']}, not {cluster_id}"
            )
        return
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
    with tmp.open("rb") as fh:
        os.fsync(fh.fileno())
    tmp.replace(meta)
