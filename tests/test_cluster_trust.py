"""The cluster can be trusted with what anyone who can write to the broker, or to the share, does
(issue 28): real `deskdex worker` processes and a real redis-server on 127.0.0.1; messages are
written into Redis by hand (LPUSH of raw bytes and of hand-made Celery envelopes), as an intruder
on the broker would.

- A worker with the setting folders opens each file beneath them following no link, and converts
  what it opened: a folder of the path swapped for a link while the batch waits is refused.
- A message that is not deskdex's is set aside (logged, dead-lettered) and the worker goes on.
- A task cannot raise the worker's own limits; the coordinator may lower them.
- The coordinator's `redelivery` governs when a killed worker's files come back, `deskdex daemon
  --broker` shows its cluster in `status` as the setting does, and is never `idle` with files out.

Where a converter must misbehave on demand (hold a file until the test lets it go) or say what it
runs under, tests/misbehaving.py and tests/limits_probe.py stand in for a library."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import DESKDEX, ROOT
from .daemon_fixture import DaemonProcess
from .test_cluster import RedisServer, Worker, _misbehaving, broker, redis_server, workers  # noqa: F401  (fixtures)
from .test_dups_cli import text

pytestmark = [pytest.mark.slow,  # Redis, workers and daemons
              pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed (packaging/system-deps.sh installs it)")]

QUEUE = "deskdex.convert"


class Resp:
    """Redis spoken by hand (RESP2) from the test process: the test's interpreter does not load
    kombu (the repository's packaging/ folder hides the library of that name on pytest's path)."""

    def __init__(self, url: str) -> None:
        host, port = url.split("//")[1].split("/")[0].split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=120)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __call__(self, *args: str | bytes | int | float) -> Any:
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        return self._read()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "redis closed the connection"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise AssertionError(f"redis: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise AssertionError(f"redis: unexpected reply {line!r}")


def envelope(task: str, args: list[Any], kwargs: dict[str, Any] | None = None, task_id: str | None = None,
             queue: str = QUEUE) -> bytes:
    """A Celery (protocol 2) task message as kombu's Redis transport lays it in a queue, made by hand."""
    tid = task_id or uuid.uuid4().hex
    body = json.dumps([args, kwargs or {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}])
    return json.dumps({
        "body": base64.b64encode(body.encode()).decode(), "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": task, "id": tid, "shadow": None, "eta": None, "expires": None,
                    "group": None, "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": tid,
                    "parent_id": None, "argsrepr": "", "kwargsrepr": "", "origin": "test", "ignore_result": True},
        "properties": {"correlation_id": tid, "reply_to": "", "delivery_mode": 2,
                       "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0,
                       "body_encoding": "base64", "delivery_tag": uuid.uuid4().hex}}).encode()


def with_outer_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the PYTHONPATH this test run was given kept after its own (another build of
    deskdex to run the workers from, as when checking that these tests fail without the fixes)."""
    outer = os.environ.get("PYTHONPATH")
    return dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep + outer) if outer and "PYTHONPATH" in env else env


def file_source(path: Path) -> dict[str, Any]:
    return {"uri": "file://" + str(path), "name": path.name, "path": str(path), "mime": None, "depth": 0,
            "data": None}


def replies(r: Resp, reply: str, n: int, timeout: float = 120.0) -> list[dict[str, Any]]:
    """``n`` results a worker pushed on ``reply``, waited for up to ``timeout`` seconds in all."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(got)} of {n} results came: {got}"
        item = r("BLPOP", reply, max(1, int(left)))
        if item is not None:
            got.append(json.loads(item[1]))
    return got


# -- 1. a worker's folders: opened beneath them, no link followed, converted from what was opened ----

def test_a_folder_swapped_for_a_link_while_the_batch_waits_is_refused(tmp_path: Path, broker: str,
                                                                      workers: list[Worker]):
    control, config, env = _misbehaving(tmp_path)
    env = with_outer_path(env)
    share = tmp_path / "share"
    (share / "sub").mkdir(parents=True)
    (share / "held1.txt").write_text("A file the converter holds until the test lets it go.")
    (share / "other1.txt").write_text("Another file of the share.")
    (share / "other2.txt").write_text("And one more.")
    (share / "sub" / "victim.txt").write_text("The share's own victim file.")
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    (secret / "victim.txt").write_text("TOPSECRET words of a file outside the folders")
    os.chmod(secret / "victim.txt", 0o600)  # root's alone: the worker may read it only because it runs as root
    (control / "hold").write_text("")
    workers.append(Worker(tmp_path, "w1", broker, f'folders = ["{share}"]\n' + config, env))

    r = Resp(broker)
    reply = "deskdex:reply:race"
    files = [share / "held1.txt", share / "other1.txt", share / "other2.txt", share / "sub" / "victim.txt"]
    r("LPUSH", QUEUE, envelope("deskdex.convert", [[file_source(f) for f in files], {}, reply]))
    deadline = time.monotonic() + 120
    while "held1.txt" not in ((control / "started").read_text() if (control / "started").exists() else ""):
        assert time.monotonic() < deadline, workers[0].log.read_text()[-3000:]
        time.sleep(0.05)
    # Every path of the batch was fine when the task arrived; now a folder of one becomes a link out.
    (share / "sub").rename(share / "sub-before")
    (share / "sub").symlink_to(secret)
    (control / "hold").unlink()
    got = {m["outcomes"][0]["uri"].rsplit("/", 1)[1]: m["outcomes"][0] for m in replies(r, reply, 4)}
    r.close()
    assert "TOPSECRET" not in json.dumps(got)
    victim = got["victim.txt"]
    assert victim["document"] is None and victim["reason"] == "unreadable", victim
    assert "symbolic link" in victim["message"] and str(share / "sub" / "victim.txt") in victim["message"]
    for name in ("held1.txt", "other1.txt", "other2.txt"):
        assert got[name]["document"] is not None, got[name]


def test_open_beneath_refuses_links_and_special_files_with_or_without_openat2(tmp_path: Path):
    from deskdex.cluster.beneath import open_beneath
    from deskdex.errors import NotRegular, UnreadableFile

    share = tmp_path / "share"
    (share / "a" / "b").mkdir(parents=True)
    (share / "a" / "b" / "f.txt").write_text("inside")
    (tmp_path / "out.txt").write_text("outside")
    (share / "a" / "link").symlink_to(tmp_path)  # a folder that is a link, on the way
    (share / "a" / "file-link.txt").symlink_to(share / "a" / "b" / "f.txt")  # the file itself, even inside
    os.mkfifo(share / "fifo")
    roots = [str(share)]
    for use_openat2 in (True, False):
        fd = open_beneath(roots, str(share / "a" / "b" / "f.txt"), use_openat2=use_openat2)
        assert os.read(fd, 100) == b"inside" and stat.S_ISREG(os.fstat(fd).st_mode)
        os.close(fd)
        for path in (share / "a" / "link" / "out.txt", share / "a" / "file-link.txt"):
            with pytest.raises(UnreadableFile, match="symbolic link"):
                open_beneath(roots, str(path), use_openat2=use_openat2)
        started = time.monotonic()
        with pytest.raises(NotRegular, match="FIFO"):
            open_beneath(roots, str(share / "fifo"), use_openat2=use_openat2)  # refused, never waited on
        assert time.monotonic() - started < 5
        with pytest.raises(UnreadableFile, match="outside the folders"):
            open_beneath(roots, str(tmp_path / "out.txt"), use_openat2=use_openat2)
        with pytest.raises(UnreadableFile, match="without . or .."):
            open_beneath(roots, str(share) + "/a/../../out.txt", use_openat2=use_openat2)
        with pytest.raises(UnreadableFile, match="vanished"):
            open_beneath(roots, str(share / "a" / "gone.txt"), use_openat2=use_openat2)


# -- 2. messages that are not deskdex's ------------------------------------------------------------

BAD_MESSAGES: list[bytes] = [
    b"garbage", b"null", b"[]", b"{}", b'"a string"', b"42", b"\xff\xfe\x00 not even UTF-8",
    b'{"properties": null}', b'{"properties": {"delivery_tag": 5}, "body": "x"}',
    b'{"properties": {"delivery_tag": "t1", "body_encoding": "base64"}, "body": "%%% not base64 %%%"}',
    b'{"properties": {"delivery_tag": "t2"}, "body": 7, "headers": []}',
]


def bad_tasks(tmp_path: Path) -> list[bytes]:
    """Envelopes Celery reads, whose task is not what deskdex sends: wrong arguments, wrong types,
    missing fields, a task of another name, limits that are not numbers, a reply to another key."""
    some = file_source(tmp_path / "docs" / "good.txt")
    return [
        envelope("deskdex.convert", []),
        envelope("deskdex.convert", [None, None, None]),
        envelope("deskdex.convert", ["x"]),
        envelope("deskdex.convert", [[some], {}, "deskdex:reply:bad", "more"], {"evil": 1}),
        envelope("deskdex.convert", [[{"uri": "file:///x"}], {}, "deskdex:reply:bad"]),  # no name
        envelope("deskdex.convert", [[some], {"time_seconds": "NaN"}, "deskdex:reply:bad"]),
        envelope("deskdex.convert", [[some], {"memory_bytes": -1}, "deskdex:reply:bad"]),
        envelope("deskdex.convert", [[some], {}, "deskdex.convert"]),  # its result pushed onto the queue
        envelope("deskdex.convert", [[some], {}, ["not", "a", "key"]]),
        envelope("deskdex.fetch", [None, None]),
        envelope("os.system", ["echo owned"]),
        envelope("deskdex.convert", [[some], {}, "deskdex:reply:bad"]).replace(b'"content-type": "application/json"',
                                                                             b'"content-type": "application/x-python-serialize"'),
    ]


def test_messages_that_are_not_deskdexs_are_set_aside_and_the_worker_goes_on(tmp_path: Path, broker: str,
                                                                              workers: list[Worker]):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("A good file about lighthouses and herons.")
    worker = Worker(tmp_path, "w1", broker)
    workers.append(worker)
    r = Resp(broker)
    reply = "deskdex:reply:good"
    bad = [*BAD_MESSAGES, *bad_tasks(tmp_path)]
    for i, message in enumerate(bad):
        r("LPUSH", QUEUE, message)
        # One good task after each few bad ones: each is converted by the same worker process.
        if i % 4 == 3 or i == len(bad) - 1:
            r("LPUSH", QUEUE, envelope("deskdex.convert", [[file_source(docs / "good.txt")], {}, reply]))
            [result] = replies(r, reply, 1)
            [outcome] = result["outcomes"]
            assert outcome["document"] is not None and "lighthouses" in outcome["document"], outcome
            assert worker.proc.poll() is None, worker.log.read_text()[-3000:]
    log = worker.log.read_text()
    # Each one logged, saying what it was and why it was refused; those the transport cannot take
    # kept in the dead-letter list for whoever looks into them.
    assert log.count("set aside a message") >= len(BAD_MESSAGES), log[-5000:]
    assert "not JSON" in log and "a JSON NoneType, not a message envelope" in log and "no properties" in log
    assert "dropped task" in log and "not deskdex's" in log
    assert r("LLEN", "deskdex:dead-letters") >= len(BAD_MESSAGES)
    kept = json.loads(r("LINDEX", "deskdex:dead-letters", -1))
    assert kept["message"] == "garbage" and kept["queue"] and "not JSON" in kept["why"]
    # Nothing left to come back: the last good task is acknowledged just after its result is pushed.
    deadline = time.monotonic() + 60
    while r("HLEN", "unacked") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert r("HLEN", "unacked") == 0 and r("LLEN", QUEUE) == 0
    assert "unregistered task" in log  # Celery's own refusal of a task of another name, logged, not run
    r.close()


# -- 3. a worker's limits are its own ---------------------------------------------------------------

def _probe_env(tmp_path: Path) -> tuple[str, dict[str, str]]:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "tests").symlink_to(ROOT / "tests")
    from .limits_probe import OVERRIDES

    config = "[converters]\n" + "".join(f'"{m}" = "{f}"\n' for m, f in OVERRIDES.items())
    return config, with_outer_path({"PYTHONPATH": str(lib)})


def test_a_task_lowers_a_workers_limits_and_never_raises_them(tmp_path: Path, broker: str, workers: list[Worker]):
    config, env = _probe_env(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "probe.txt").write_text("what do I run under")
    workers.append(Worker(tmp_path, "w1", broker, "time_limit = 40.0\nmemory_limit_mb = 900\nmax_file_mb = 20\n"
                                                  "[ocr]\nenabled = false\n" + config.replace("[converters]", "\n[converters]"),
                          env))
    r = Resp(broker)

    def probe(limits: dict[str, Any]) -> str:
        reply = f"deskdex:reply:{uuid.uuid4().hex}"
        r("LPUSH", QUEUE, envelope("deskdex.convert", [[file_source(docs / "probe.txt")], limits, reply]))
        [result] = replies(r, reply, 1)
        [outcome] = result["outcomes"]
        assert outcome["document"] is not None, outcome
        return str(outcome["document"])

    # Written by hand: an hour, no memory limit, 1 TB files, OCR on. The worker's own hold.
    raised = probe({"time_seconds": 3600.0, "memory_bytes": 0, "file_bytes": 2**40, "text_chars": 10**12,
                    "ocr": {"enabled": True}})
    assert f"time=40 memory={900 * 2**20} file={20 * 2**20} text=20000000 ocr=False" in raised, raised
    # A coordinator asking for less gets less.
    lowered = probe({"time_seconds": 25.0, "memory_bytes": 800 * 2**20, "file_bytes": 2**20, "text_chars": 1000})
    assert f"time=25 memory={800 * 2**20} file={2**20} text=1000 ocr=False" in lowered, lowered
    r.close()


def test_lowered_takes_the_stricter_of_each_limit():
    from deskdex.cluster.worker import lowered
    from deskdex.converters.limits import Limits, OcrOptions

    own = Limits(time_seconds=40.0, memory_bytes=2**29, file_bytes=2**20, depth=4,
                 ocr=OcrOptions(enabled=True, min_pixels=100, seconds=10.0))
    asked = Limits(time_seconds=3600.0, memory_bytes=0, file_bytes=2**10, depth=20,
                   ocr=OcrOptions(enabled=True, languages=("deu",), min_pixels=10, seconds=5.0))
    got = lowered(asked, own)
    assert (got.time_seconds, got.memory_bytes, got.file_bytes, got.depth) == (40.0, 2**29, 2**10, 4)
    assert got.ocr == OcrOptions(enabled=True, languages=("deu",), min_pixels=100, seconds=5.0)
    assert lowered(Limits(memory_bytes=2**28), Limits(memory_bytes=0)).memory_bytes == 2**28  # 0: none at all


# -- 4. the coordinator's redelivery, its broker in status, never idle with files out -----------------

def test_a_killed_workers_files_come_back_after_the_coordinators_redelivery(tmp_path: Path, broker: str,
                                                                             workers: list[Worker]):
    control, config, env = _misbehaving(tmp_path)
    env = with_outer_path(env)
    n = 161
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(n - 1):
        (docs / f"note{i:03}.txt").write_text(f"Kestrel note {i}. " + text(500 + i, 30))
    (docs / "held1.txt").write_text("Kestrel: a file the first worker holds until it is killed.")
    (control / "hold").write_text("")
    # The workers keep the default redelivery (300 s); the coordinator's is 3 s. The daemon is
    # started as the README says, its broker given by --broker, not in its config file.
    first = Worker(tmp_path, "first", broker, config, env, verbose=True)
    workers.append(first)
    daemon = DaemonProcess(tmp_path / "coordinator", [docs], extra_config="redelivery = 3.0\n",
                           args=("--broker", broker))
    status_env = dict(os.environ, DESKDEX_HOME=str(daemon.home), NO_COLOR="1")

    def status() -> dict[str, Any]:
        p = subprocess.run([DESKDEX, "status", "--json"], capture_output=True, text=True, env=status_env,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        return dict(json.loads(p.stdout))

    daemon.start(wait=False)
    try:
        deadline = time.monotonic() + 300
        while "held1.txt" not in ((control / "started").read_text() if (control / "started").exists() else ""):
            assert time.monotonic() < deadline, first.log.read_text()[-3000:]
            assert daemon.proc is not None and daemon.proc.poll() is None, daemon.log.read_text()
            time.sleep(0.05)
        workers.append(Worker(tmp_path, "second", broker, config, env, verbose=True))
        st = status()
        assert st["state"] != "idle" and "cluster" in st, st
        first.proc.send_signal(signal.SIGKILL)  # while it holds held1.txt and the rest of its task
        first.proc.wait()
        (control / "hold").unlink()
        killed = time.monotonic()
        seen: list[tuple[float, str, int, int]] = []
        while True:
            st = status()
            seen.append((round(time.monotonic() - killed, 1), st["state"], st["queue"], st["documents"]))
            assert "cluster" in st and st["cluster"].get("workers") is not None, st.get("cluster")  # --broker shown
            if st["state"] == "idle":
                # Idle only once every file is indexed: never while files are out at workers.
                assert st["documents"] == n and st["queue"] == 0, seen
                break
            # Far below the workers' 300 s (and the coordinator's silence of time_limit + redelivery + 30 s).
            assert time.monotonic() - killed < 150, seen
            time.sleep(0.5)
        took = time.monotonic() - killed
        hits = daemon.call("search", query="kestrel", limit=n + 10)["hits"]
        assert sorted(h["path"] for h in hits) == sorted(str(p) for p in docs.iterdir())
        # Begun by the first worker, converted by the second (more than once when the machine is so
        # slow that the held file outlasted the 3 s of redelivery there too), stored once (above).
        assert (control / "started").read_text().splitlines().count("held1.txt") >= 2
        requeued = daemon.log.read_text().count("queued again")
        assert requeued >= 1, daemon.log.read_text()[-3000:]
        print(f"{n} files, one of two workers killed: all indexed {took:.1f} s after the kill, {requeued} "
              f"tasks queued again by the coordinator; status seen {seen[:3]} ... {seen[-2:]}")
        # `deskdex status` shows the broker the daemon was started with, as with the setting.
        p = subprocess.run([DESKDEX, "status"], capture_output=True, text=True, env=status_env, timeout=120)
        assert "cluster:   redis://127.0.0.1" in p.stdout and "second@test" in p.stdout, p.stdout
    finally:
        daemon.stop()
    # A daemon stopped: the record of its broker is not read any more (status reads the setting).
    st = status()
    assert st["daemon"] is False and "cluster" not in st, st
