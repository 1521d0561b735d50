"""The one exception a Kafka handler may raise on purpose: the connection must close."""

from __future__ import annotations


class CloseConnection(Exception):
    """The connection must close; the message says why."""
