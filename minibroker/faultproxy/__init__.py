"""A fault-injecting TCP proxy on loopback: every link of a process-mode cluster goes through
it, and each link direction can be cut, delayed or throttled on command. model.py: the
vocabulary (pure; re-exported here); engine.py: the data path; client.py: FaultProxyClient."""

from minibroker.faultproxy.model import (
    ALL,
    CLIENT,
    GROUPS,
    HOST,
    SERVICE,
    ZOOKEEPER,
    Direction,
    DirectionFault,
    FaultRequest,
    FaultRequestError,
    LinkSpec,
    LinkView,
    link_name,
    parse_link_table,
)

__all__ = [
    "ALL",
    "CLIENT",
    "GROUPS",
    "HOST",
    "SERVICE",
    "ZOOKEEPER",
    "Direction",
    "DirectionFault",
    "FaultRequest",
    "FaultRequestError",
    "LinkSpec",
    "LinkView",
    "link_name",
    "parse_link_table",
]
