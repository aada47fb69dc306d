"""The private names deskdex still uses because nothing public does the job (tests/test_private_names.py,
KNOWN), each checked here on the Python that runs the tests: when a release changes one, this fails
naming that Python, instead of deskdex silently getting slower or holding memory (issue 29).
Tested on CPython 3.11.7."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from .conftest import ROOT

PYTHON = f"CPython {sys.version.split()[0]}"


def test_the_client_socket_module_is_what_socket_is_built_on() -> None:
    # clients/client.py connects with _socket (0.6 ms to import) rather than socket (~18 ms), and
    # falls back to socket without it: a change here makes every client start slower, not broken.
    import _socket
    import socket

    assert issubclass(socket.socket, _socket.socket), \
        f"{PYTHON}: socket.socket is no longer built on _socket.socket (clients/client.py)"
    assert (_socket.AF_UNIX, _socket.SOCK_STREAM) == (socket.AF_UNIX, socket.SOCK_STREAM), \
        f"{PYTHON}: _socket's AF_UNIX/SOCK_STREAM differ from socket's (clients/client.py)"


# In a process of its own: the fork server is one per process, and other tests start and end theirs.
PROBE = textwrap.dedent("""
    import os, sys
    from multiprocessing import forkserver
    from deskdex.converters.isolation import fork_server_idle, release_fork_server

    def children():
        task = f"/proc/{os.getpid()}/task"
        return {int(p) for t in os.listdir(task) for p in open(f"{task}/{t}/children").read().split()}

    assert not fork_server_idle(), "idle before any fork server started"
    before = children()
    forkserver.ensure_running()  # public: starts the process-wide fork server (and resource tracker)
    running = children()
    assert running - before, "ensure_running started no process"
    assert fork_server_idle(), "a running fork server is not seen as running"
    assert release_fork_server(), "release_fork_server did not end the idle fork server"
    assert len(running - children()) == 1, f"children before {running}, after {children()}"
    assert not fork_server_idle(), "the fork server still counts as running once ended"
    print("OK")
""")


def test_an_idle_fork_server_is_found_and_ended() -> None:
    # converters/isolation.py reads multiprocessing.forkserver's _forkserver, _forkserver_pid and
    # calls its _stop (no public way to ask whether it runs or to end it); without them an idle
    # daemon keeps the fork server's 50 MiB of preloaded converters.
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip() == "OK", (
        f"{PYTHON}: multiprocessing.forkserver's private _forkserver/_forkserver_pid/_stop changed, "
        f"converters/isolation.py can no longer end an idle fork server (tested on 3.11.7):\n{p.stderr}")
