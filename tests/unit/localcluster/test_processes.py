"""A SIGKILLed process is dead for us only once it let go of its sockets: the first of its
threads out is a zombie while another still tears down the address space, and until that one
closes the files a listening socket accepts connections and holds its port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

from minibroker.localcluster.ports import free_ports
from minibroker.localcluster.processes import _launch, is_alive
from minibroker.localcluster.state import HOST, ProcessInfo

# Listens, fills 100 MB (a broker's size: its teardown takes a while) and runs threads.
CHILD = """
import socket, sys, threading, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
memory = bytearray(100 * 1024 * 1024)
for i in range(0, len(memory), 4096):
    memory[i] = 1
for _ in range(8):
    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
print("ready", flush=True)
time.sleep(1000)
"""


def _accepts(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=2).close()
    except ConnectionRefusedError:
        return False
    return True


def test_a_killed_process_is_dead_only_once_its_listening_socket_is_closed(
    tmp_path: Path,
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for port in free_ports(5):  # a few rounds: the window is milliseconds wide
        log = tmp_path / f"child-{port}.log"
        cmd = [sys.executable, str(script), HOST, str(port)]
        info = ProcessInfo("child", "broker", None, HOST, port, str(tmp_path), str(log), cmd)
        _launch(info)
        try:
            deadline = time.monotonic() + 30
            while "ready" not in (log.read_text() if log.exists() else ""):
                assert is_alive(info) and time.monotonic() < deadline, "the child did not start"
                time.sleep(0.02)
            assert _accepts(port)
            os.kill(info.pid, signal.SIGKILL)
            while is_alive(info):
                assert time.monotonic() < deadline, "the killed child never died"
                time.sleep(0.001)
            assert not _accepts(port), f"round on port {port}: dead, yet its socket accepted"
        finally:
            if is_alive(info):
                os.kill(info.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # is_alive may have reaped it
                os.waitpid(info.pid, 0)
