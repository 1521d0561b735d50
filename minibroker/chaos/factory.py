"""Choosing the chaos backend from what the user gave: a cluster dir (process mode, the
default) or a compose project name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from minibroker.chaos.backend import ChaosBackend, ChaosError
from minibroker.chaos.compose import ComposeBackend
from minibroker.chaos.process import ProcessBackend
from minibroker.localcluster import DEFAULT_DIR

# Where a compose cluster's ZooKeeper is published on the host, unless --zk or $MINIBROKER_ZK.
DEFAULT_ZK = "127.0.0.1:2181"


def backend_for(
    cluster_dir: Path | None = None,
    compose_project: str | None = None,
    zk: str | None = None,
    *,
    docker_client: Any | None = None,
) -> ChaosBackend:
    """ComposeBackend when `compose_project` is given (ZooKeeper at `zk`, else $MINIBROKER_ZK,
    else DEFAULT_ZK); otherwise ProcessBackend of `cluster_dir` (else $MINIBROKER_DIR, else
    the default dir). A process-mode cluster's ZooKeeper is in its state file: `zk` is unused."""
    if compose_project is not None:
        if cluster_dir is not None:
            raise ChaosError(
                "give a cluster dir (--dir) or a compose project (--compose), not both"
            )
        zk_connect = zk or os.environ.get("MINIBROKER_ZK") or DEFAULT_ZK
        return ComposeBackend(compose_project, zk_connect, client=docker_client)
    if cluster_dir is None:
        cluster_dir = Path(os.environ.get("MINIBROKER_DIR") or DEFAULT_DIR)
    return ProcessBackend(cluster_dir)
