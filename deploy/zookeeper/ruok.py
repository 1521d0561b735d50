"""The ZooKeeper container's health check: healthy when the server answers `ruok` with `imok`."""

import socket
import sys

try:
    with socket.create_connection(("127.0.0.1", 2181), timeout=2) as sock:
        sock.sendall(b"ruok")
        answer = sock.recv(16)
except OSError as exc:
    sys.exit(f"zookeeper: {exc}")
sys.exit(0 if answer == b"imok" else f"zookeeper answered {answer!r}")
