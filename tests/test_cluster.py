"""Past one machine: `deskdex index --broker` hands its files to real `deskdex worker` processes
through a real redis-server on 127.0.0.1 (Celery), and gets what a single machine gets; a worker
killed with SIGKILL in the middle of a file loses nothing and doubles nothing.

Converters are the real ones, except in the fault tests, where tests/misbehaving.py stands in for
a file whose conversion crashes, or lasts until the test lets it end (so a worker can be killed
while it holds that file, which no real library does on demand)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import CLI, DESKDEX, ROOT, make_docx, make_pdf
from .misbehaving import settings_for
from .servers import free_port
from .test_dups_cli import text

pytestmark = [pytest.mark.slow,  # Redis, workers and daemons
              pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed (packaging/system-deps.sh installs it)")]


class RedisServer:
    """A redis-server of the test's own on a free loopback port; ``persist``: with its
    append-only file, so that a restart keeps the queue (docs/scale-out.md asks that of a broker)."""

    def __init__(self, folder: Path, persist: bool = False) -> None:
        self.port = free_port()
        self.folder = folder
        self.persist = persist
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "yes" if self.persist else "no", "--dir", str(self.folder)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: a clean shutdown, the append-only file flushed
            self.proc.wait(10)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def broker(redis_server: RedisServer) -> str:
    return redis_server.url


class Worker:
    """A `deskdex worker` process with a home of its own, its log in a file."""

    def __init__(self, tmp_path: Path, name: str, broker: str, config: str = "", env: dict[str, str] | None = None,
                 concurrency: int = 1, verbose: bool = False, args: tuple[str, ...] = ()) -> None:
        self.home = tmp_path / f"home-{name}"
        (self.home / "config").mkdir(parents=True)
        (self.home / "config" / "config.toml").write_text(config)
        self.log = tmp_path / f"{name}.log"
        e = dict(os.environ, DESKDEX_HOME=str(self.home), NO_COLOR="1", **(env or {}))
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([DESKDEX, *(["-v"] if verbose else []), "worker", "--broker", broker, "--concurrency", str(concurrency),
                                          "--name", f"{name}@test", *args], stdout=log, stderr=subprocess.STDOUT,
                                         env=e, cwd=ROOT)
        deadline = time.monotonic() + 60
        while " ready." not in self.log.read_text():
            assert self.proc.poll() is None, f"worker {name} exited:\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"worker {name} never became ready:\n{self.log.read_text()}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


def _misbehaving(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """misbehaving.settings_for, with only ``tests`` on the converters' path: the repository's root
    would put its packaging/ folder in place of the ``packaging`` library kombu imports."""
    control = tmp_path / "control"
    config, env = settings_for(control)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "tests").symlink_to(ROOT / "tests")
    return control, config, dict(env, PYTHONPATH=str(lib))


def _cli(tmp_path: Path, name: str, config: str) -> CLI:
    home = tmp_path / name
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(config)
    return CLI(home)


def _tree(d: Path) -> list[Path]:
    """Files of every kind the comparison needs: texts, an exact copy, near-duplicates in two
    formats, a web page, a PDF, a corrupt PDF and a file whose converter crashes."""
    d.mkdir()
    body = text(1)
    (d / "report.txt").write_text("Quarterly report\n\n" + body)
    (d / "report-copy.txt").write_text("Quarterly report\n\n" + body)
    (d / "report-revised.txt").write_text("Quarterly report, revised in November\n\n" + body)
    make_docx(d / "report.docx", "Quarterly report", "Ann", "Quarterly report", [body])
    for i in range(2, 14):
        (d / f"note{i}.txt").write_text(f"Note {i}\n\n" + text(i, 60 + 10 * i))
    (d / "page.html").write_text("<html><head><title>Harbour page</title></head><body><nav>Home | About</nav>"
                                 "<article><h1>The harbour</h1><p>" + text(40, 120) + "</p></article></body></html>")
    make_pdf(d / "paper.pdf", "A paper on glaciers", "Bo", ["Glacier and fjord " + text(41, 150)])
    (d / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj <<")
    (d / "crash1.txt").write_text("this converter aborts")
    return sorted(d.iterdir())


QUERIES = ["report", "harbour", "glacier fjord", "orchard violin", "quarterly report november", "note",
           "walnut", "title:harbour", "ext:pdf", "raven OR willow"]


def _picture(cli: CLI, files: list[Path]) -> dict[str, object]:
    """What a user sees of an index: counts and failures, every document's stored text, the
    duplicate clusters, and the ranked results of a set of queries."""
    status = cli.json("status")
    shown = {}
    for f in files:
        p = cli.run("show", str(f), check=False)
        shown[f.name] = (p.returncode, p.stdout)
    clusters = sorted(sorted(Path(x["path"]).name for x in c["documents"]) for c in cli.json("dups")["clusters"])
    results = {}
    for q in QUERIES:
        res = cli.json("search", *q.split(), "--limit", "50")
        # Equal scores (tantivy stores a field's length in one byte, so two notes of 160 and 170
        # words tie) come in the order the documents were added, which workers do not keep.
        hits = sorted((-round(h["score"], 5), Path(h["path"]).name, h["duplicates"], h["similar"]) for h in res["hits"])
        results[q] = (res["total"], hits)
    return {"documents": status["documents"], "failed": status["failed_by_reason"], "shown": shown,
            "clusters": clusters, "results": results}


def test_workers_index_what_one_machine_indexes(tmp_path: Path, broker: str, workers: list[Worker]):
    control, config, env = _misbehaving(tmp_path)
    files = _tree(tmp_path / "docs")
    workers.append(Worker(tmp_path, "w1", broker, config, env, verbose=True))
    workers.append(Worker(tmp_path, "w2", broker, config, env, verbose=True))

    remote = _cli(tmp_path, "coordinator", config)
    summary = json.loads(remote.run("index", str(tmp_path / "docs"), "--broker", broker, "--json",
                                    env=env).stdout)
    local = _cli(tmp_path, "single", config)
    expected = json.loads(local.run("index", str(tmp_path / "docs"), "--json", env=env).stdout)

    assert summary["failed_by_reason"] == expected["failed_by_reason"] == {"corrupt": 1, "crash": 1}
    assert (summary["indexed"], summary["reused"]) == (expected["indexed"], expected["reused"])
    # Both workers converted files (verbose: a line for each): the work was shared.
    for w in workers:
        assert "succeeded" in w.log.read_text(), w.log.read_text()[-3000:]
    seen, want = _picture(remote, files), _picture(local, files)
    assert seen["clusters"] == want["clusters"] and want["clusters"], seen["clusters"]
    for q in QUERIES:
        assert seen["results"][q] == want["results"][q], q
    assert seen == want


def test_a_worker_killed_in_the_middle_loses_and_doubles_nothing(tmp_path: Path, broker: str,
                                                                  workers: list[Worker]):
    control, config, env = _misbehaving(tmp_path)
    config = "redelivery = 3.0\n" + config  # the killed worker's files come back after 3 s, not 300
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        (docs / f"note{i:02}.txt").write_text(f"Shared word lantern. Note {i}\n\n" + text(100 + i, 40))
    (docs / "held1.txt").write_text("Shared word lantern. A file whose conversion lasts until the test lets it end.")
    (control / "hold").write_text("")
    first = Worker(tmp_path, "first", broker, config, env)
    workers.append(first)

    coordinator = _cli(tmp_path, "coordinator", config)
    e = dict(os.environ, DESKDEX_HOME=str(coordinator.home), NO_COLOR="1", **env)
    index = subprocess.Popen([DESKDEX, "index", str(docs), "--broker", broker, "--json", "--no-progress"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while "held1.txt" not in ((control / "started").read_text() if (control / "started").exists() else ""):
            assert index.poll() is None, index.communicate()
            assert time.monotonic() < deadline, "the worker never took held1.txt"
            time.sleep(0.05)
        # `deskdex status` counts what the worker holds, by queue.
        looker = _cli(tmp_path, "looker", f'broker = "{broker}"\n')
        taken = looker.json("status")["cluster"]["taken"]
        assert taken.get("deskdex.convert", 0) >= 1, taken
        first.proc.kill()  # SIGKILL while it converts held1.txt, with more files taken and not acknowledged
        first.proc.wait()
        killed = time.monotonic()
        (control / "hold").unlink()
        workers.append(Worker(tmp_path, "second", broker, config, env, concurrency=2))
        out, err = index.communicate(timeout=120)
        # Given back by Redis after the 3 s of redelivery, not sent again by the coordinator after
        # its silence of time_limit + redelivery + 30 s.
        assert time.monotonic() - killed < 60
    finally:
        if index.poll() is None:
            index.kill()
            index.communicate()
    assert index.returncode == 0, err
    summary = json.loads(out)
    assert summary["failed"] == 0, summary["failures"]
    assert summary["indexed"] == 31
    status = coordinator.json("status")
    assert status["documents"] == 31
    # Every file once in the full-text index too: a second delivery must not add a second document.
    res = coordinator.json("search", "lantern", "--all", "--limit", "100")
    assert res["total"] == 31
    assert sorted(Path(h["path"]).name for h in res["hits"]) == sorted(p.name for p in docs.iterdir())
    # Begun by the killed worker, converted again by the second: twice, and stored once (above).
    assert (control / "started").read_text().splitlines().count("held1.txt") == 2


def test_no_worker_and_no_broker_are_clear_errors(tmp_path: Path):
    cli = _cli(tmp_path, "alone", "")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("some text")
    p = cli.run("index", str(docs), "--broker", f"redis://127.0.0.1:{free_port()}/0", check=False)
    assert p.returncode != 0
    assert "broker" in p.stderr and "127.0.0.1" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = cli.run("worker", check=False)
    assert p.returncode == 2 and "--broker" in p.stderr


def test_the_daemon_coordinates_and_waits_out_a_lost_broker(tmp_path: Path, redis_server: RedisServer,
                                                            workers: list[Worker]):
    from .daemon_fixture import DaemonProcess

    redis_server.stop()
    redis_server.persist = True
    redis_server.start()
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(5):
        (docs / f"first{i}.txt").write_text(f"Cormorant {i}. " + text(200 + i, 40))
    workers.append(Worker(tmp_path, "w1", redis_server.url, concurrency=2))
    daemon = DaemonProcess(tmp_path / "daemon-home", [docs], extra_config=f'broker = "{redis_server.url}"\n')
    daemon.start()
    try:
        assert len(daemon.search("cormorant")) == 5
        (docs / "saved.txt").write_text("Cormorant saved while the daemon watches. " + text(300, 40))
        daemon.eventually("cormorant", sorted(str(p) for p in docs.iterdir()))

        # The broker goes away: the change waits, `status` says why; back, the change is indexed.
        redis_server.stop()
        (docs / "while-down.txt").write_text("Cormorant written while the broker was down. " + text(301, 40))
        st = daemon.wait_for(lambda st: st["state"] == "stalled", what="a stall on the lost broker")
        assert "broker" in str(st.get("state_reason", "")), st
        redis_server.start()
        daemon.eventually("cormorant", sorted(str(p) for p in docs.iterdir()), quiet=120)
        daemon.wait_for(lambda st: st["state"] == "idle", what="idle after the broker came back")

        cluster = json.loads(subprocess.run([DESKDEX, "status", "--json"], capture_output=True, text=True,
                                            env=dict(os.environ, DESKDEX_HOME=str(daemon.home)),
                                            check=True).stdout)["cluster"]
        assert cluster.get("workers") == ["w1@test"] and cluster["queued"] == 0, cluster
    finally:
        daemon.stop()


def test_a_shard_daemon_hands_its_conversions_to_workers(tmp_path: Path, broker: str, workers: list[Worker]):
    """The settings shard and broker together: a daemon that keeps shard 1 of 2 of a share holds
    its folders' files only, converted by the worker, on start and as files are saved."""
    from deskdex.webcrawl.urls import shard_of

    from .daemon_fixture import DaemonProcess

    docs = tmp_path / "docs"
    # At least 8 folders, and more until both shards hold one: which shard a folder falls in depends
    # on its path, and so on the test's temporary folder (all 8 in one shard failed a CI run).
    k = 0
    while k < 8 or len({shard_of(str(docs / f"folder{i}"), 2) for i in range(k)}) < 2:
        (docs / f"folder{k}").mkdir(parents=True)
        for j in range(2):
            (docs / f"folder{k}" / f"note{j}.txt").write_text(f"Puffin note {k}.{j}. " + text(100 * k + j, 40))
        k += 1
    mine = sorted(str(p) for p in docs.rglob("*.txt") if shard_of(str(p.parent), 2) == 1)
    assert mine and len(mine) < 2 * k
    workers.append(Worker(tmp_path, "w1", broker, verbose=True))
    daemon = DaemonProcess(tmp_path / "shard1", [docs], extra_config=f'shard = "1/2"\nbroker = "{broker}"\n')
    daemon.start()
    try:
        assert sorted(daemon.search("puffin")) == mine
        def converted() -> int:  # conversion tasks the worker made (its log is verbose: a line for each)
            return sum(1 for line in workers[0].log.read_text().splitlines()
                       if "Task deskdex.convert[" in line and " succeeded in " in line)

        at_start = converted()
        assert at_start > 0
        theirs = next(f for f in sorted(docs.iterdir()) if shard_of(str(f), 2) == 0)
        ours = next(f for f in sorted(docs.iterdir()) if shard_of(str(f), 2) == 1)
        (theirs / "saved.txt").write_text("Puffin saved in the other shard's folder, with the word guillemot.")
        (ours / "saved.txt").write_text("Puffin saved in this shard's folder, with the word guillemot.")
        daemon.eventually("guillemot", [str(ours / "saved.txt")])
        assert converted() > at_start  # the worker converted it
    finally:
        daemon.stop()


def test_a_worker_with_folders_reads_nothing_else(tmp_path: Path, broker: str, workers: list[Worker]):
    """Whoever can write to the broker names the paths a worker reads: a worker whose setting
    folders is set refuses any other, and any symbolic link beneath them."""
    docs = tmp_path / "docs"
    (docs / "share").mkdir(parents=True)
    (docs / "private").mkdir()
    (docs / "share" / "report.txt").write_text("Quarterly report of the share")
    (docs / "private" / "diary.txt").write_text("Dear diary, a private entry")
    (docs / "share" / "link.txt").symlink_to(docs / "private" / "diary.txt")
    workers.append(Worker(tmp_path, "w1", broker, f'folders = ["{docs / "share"}"]\n'))

    # Through a coordinator: the share's file is indexed, the other fails, saying why.
    cli = _cli(tmp_path, "coordinator", "")
    summary = json.loads(cli.run("index", str(docs), "--broker", broker, "--json").stdout)
    failed = {Path(f["path"]).name: (f["reason"], f["message"]) for f in summary["failures"]}
    assert list(failed) == ["diary.txt"] and failed["diary.txt"][0] == "unreadable", summary
    assert "outside the folders" in failed["diary.txt"][1]
    assert [Path(h["path"]).name for h in cli.json("search", "quarterly")["hits"]] == ["report.txt"]
    assert cli.json("search", "entry")["total"] == 0  # its text was never read (its name is indexed)

    # A task written to the broker by hand, naming the symbolic link: refused as well. Sent from
    # a process of its own: on pytest's path, the repository's packaging/ hides the library
    # kombu imports.
    forge = f"""
import json, sys, redis
from deskdex.cluster.app import QUEUE, TASK, make_app
from deskdex.cluster.wire import limits_to_wire, source_to_wire
from deskdex.converters import Limits, Source
app = make_app({broker!r}, 300.0)
app.send_task(TASK, args=[[source_to_wire(Source.from_path({str(docs / "share" / "link.txt")!r}))],
              limits_to_wire(Limits()), "deskdex:reply:test"], task_id="forged", queue=QUEUE)
item = redis.Redis.from_url({broker!r}).blpop(["deskdex:reply:test"], timeout=60)
print(item[1].decode() if item else "")
"""
    p = subprocess.run([sys.executable, "-c", forge], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert p.returncode == 0 and p.stdout.strip(), p.stderr
    [outcome] = json.loads(p.stdout)["outcomes"]
    assert outcome["document"] is None and outcome["reason"] == "unreadable", outcome
    assert "symbolic link" in outcome["message"]  # opened beneath the folders, no link followed


def test_without_celery_the_commands_say_what_to_install(tmp_path: Path):
    """A desktop install has no Celery: a broker set anyway is refused at once, saying how to get it.
    Celery is hidden here by a package of that name that cannot be imported (it is installed in the
    test venv)."""
    hidden = tmp_path / "hidden" / "celery"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("hidden by the test", name="celery")\n')
    cli = _cli(tmp_path, "alone", 'broker = "redis://127.0.0.1:9/0"\n')
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("some text")
    env = {"PYTHONPATH": str(tmp_path / "hidden")}
    for args in (("daemon", "--once"), ("index", str(docs)), ("worker",)):
        p = cli.run(*args, check=False, env=env)
        assert p.returncode != 0 and "pip install 'deskdex[cluster]'" in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr, (args, p.stderr)
