"""A SIGKILLed process is dead for us only once it let go of its sockets: the first of its
threads out is a zombie while another still tears down the address space, and until that one
closes the files a listening socket accepts connections and holds its port. Meanwhile its
command line reads empty, so it is known by its start time, also when it is not our child
(a cluster's processes outlive the `cluster up` that started them)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from minibroker.localcluster.ports import free_ports
from minibroker.localcluster.processes import _launch, is_alive, start_time
from minibroker.localcluster.state import HOST, ProcessInfo

# Listens, fills 100 MB (a broker's size: its teardown takes a while) and runs threads; with
# "orphan", forks first and prints the child's PID: then it is not our child.
CHILD = """
import os, socket, sys, threading, time
if sys.argv[3] == "orphan" and os.fork():
    os._exit(0)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
memory = bytearray(100 * 1024 * 1024)
for i in range(0, len(memory), 4096):
    memory[i] = 1
for _ in range(8):
    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
print("ready", os.getpid(), flush=True)
time.sleep(1000)
"""


def _accepts(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=2).close()
    except ConnectionRefusedError:
        return False
    return True


def _started(tmp_path: Path, port: int, how: str) -> ProcessInfo:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / f"child-{port}.log"
    cmd = [sys.executable, str(script), HOST, str(port), how]
    info = ProcessInfo("child", "broker", None, HOST, port, str(tmp_path), str(log), cmd)
    _launch(info)
    deadline = time.monotonic() + 30
    while "ready" not in (text := log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.02)
    if how == "orphan":  # the forked child listens; ours has exited
        os.waitpid(info.pid, 0)
        pid = int(text.split()[1])
        info = replace(info, pid=pid, start_time=start_time(pid))
    return info


@pytest.mark.parametrize("how", ["child", "orphan"])
def test_a_killed_process_is_dead_only_once_its_listening_socket_is_closed(
    tmp_path: Path, how: str
) -> None:
    for port in free_ports(5):  # a few rounds: the window is milliseconds wide
        info = _started(tmp_path, port, how)
        try:
            assert is_alive(info) and _accepts(port)
            os.kill(info.pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while is_alive(info):
                assert time.monotonic() < deadline, "the killed child never died"
                time.sleep(0.001)
            assert not _accepts(port), f"round on port {port}: dead, yet its socket accepted"
            assert not is_alive(info), "dead, then alive again"
        finally:
            if is_alive(info):
                os.kill(info.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # reaped, or not our child
                os.waitpid(info.pid, 0)


def test_a_pid_given_to_a_later_process_is_not_ours(tmp_path: Path) -> None:
    info = _started(tmp_path, free_ports(1)[0], "child")
    try:
        assert info.start_time and is_alive(info)
        assert not is_alive(replace(info, start_time=str(int(info.start_time) - 1)))
    finally:
        os.kill(info.pid, signal.SIGKILL)
        os.waitpid(info.pid, 0)
