"""Shared fixtures: a private deskdex home per test, the CLI run in-process or as a real process,
and generated documents of the first formats."""

from __future__ import annotations

import json
import re
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

# A test run started with SIGINT ignored (a script run as a background job, `cmd &` in a shell
# without job control) passes that on to every command the tests start, and deskdex rightly keeps
# an inherited SIGINT ignored (clients/managing.stop_on_signal): the tests of Ctrl-C stand for a
# terminal's Ctrl-C, so they start from Python's own handler.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
# deskdex.__version__, from the source (pyproject.toml takes it from there): what an installed copy must say.
VERSION = re.search(r'^__version__ = "([^"]+)"$', (ROOT / "core" / "__init__.py").read_text(),
                    re.M).group(1)  # type: ignore[union-attr]
# The console script as installed (make test installs the package first): tests run what users run,
# never the checkout on sys.path.
DESKDEX = str(Path(sys.executable).parent / "deskdex")
CORPUS = Path(os.environ.get("DESKDEX_CORPUS", "/tmp/corpora/mixed"))


def _running(t: threading.Thread) -> bool:
    """Whether a thread still runs. A thread Python did not start (Qt's pool, a Rust library) that
    once ran Python code stays in threading.enumerate() as a _DummyThread that says it is alive
    forever (Python 3.11): ask the kernel whether its OS thread still exists instead."""
    if isinstance(t, threading._DummyThread):  # type: ignore[attr-defined]
        return t.native_id is not None and os.path.exists(f"/proc/self/task/{t.native_id}")
    return t.is_alive()


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    """A test that leaves a thread running fails, daemon threads included (every thread deskdex
    starts is one): what a test starts, it stops and joins. No grace period: a thread that is
    still ending when the test returns was not joined, which is the leak."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and _running(t)]
    assert not leaked, f"threads left running: {leaked}"


def _children() -> dict[int, str]:
    """The live child processes of this (pytest's) process, pid -> command line, from /proc."""
    me, out = os.getpid(), {}
    for task in os.listdir(f"/proc/{me}/task"):
        try:
            pids = Path(f"/proc/{me}/task/{task}/children").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        for pid in map(int, pids):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # it ended meanwhile
                continue
            if stat.rsplit(")", 1)[1].split()[0] != "Z":  # a zombie has exited; only its status is left
                out[pid] = cmd.strip()
    return out


_STARTED_BY: dict[int, str] = {}  # child pid -> the test during which it appeared


@pytest.fixture(autouse=True)
def _who_started_children(request: pytest.FixtureRequest) -> Iterator[None]:
    """Remembers which test a child process appeared in, for no_leftover_processes' message."""
    if not sys.platform.startswith("linux"):
        yield
        return
    before = set(_children())
    yield
    for pid in set(_children()) - before:
        _STARTED_BY.setdefault(pid, request.node.nodeid)


def _stop_multiprocessing_helpers() -> None:
    """multiprocessing's fork server and resource tracker serve every WorkerPool for the life of
    the process that started them, so a test cannot stop them; they are stopped here, before the
    check, through their private _stop() (there is no public way), so that what is left is a leak."""
    from multiprocessing import forkserver, resource_tracker

    forkserver._forkserver._stop()  # type: ignore[attr-defined]
    resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """The run fails if a test left a process behind (a daemon, Xvfb, a worker): each test waits
    for what it starts. Processes that are ending get a few seconds to go."""
    if not sys.platform.startswith("linux"):
        yield
        return
    before = set(_children())
    yield
    _stop_multiprocessing_helpers()
    deadline = time.monotonic() + 5
    while (left := {p: c for p, c in _children().items() if p not in before}) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, "processes left running by the tests:\n" + "\n".join(
        f"  {pid} {cmd[:200]} (appeared in {_STARTED_BY.get(pid, 'a fixture or the session')})"
        for pid, cmd in left.items())


@pytest.fixture(scope="session", autouse=True)
def _remove_readable_install() -> Iterator[None]:
    """Removes the install other accounts run from (tests/accounts.readable_install), if a test made one."""
    yield
    from .accounts import remove_readable_install

    remove_readable_install()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user can reach (pytest's tmp_path sits in a 0700 folder of root's): for the
    tests with real accounts (tests/accounts.py)."""
    d = Path(tempfile.mkdtemp(prefix="deskdex-privacy-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


class CLI:
    def __init__(self, home: Path) -> None:
        self.home = home

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None,
            timeout: float = 120, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``deskdex`` as a real process, the way a user does (``input_text``: its standard input)."""
        e = dict(os.environ, DESKDEX_HOME=str(self.home), NO_COLOR="1", **(env or {}))
        p = subprocess.run([DESKDEX, *args], capture_output=True, text=True, input=input_text,
                           stdin=None if input_text is not None else subprocess.DEVNULL,
                           env=e, timeout=timeout, cwd=ROOT)
        if check and p.returncode != 0:
            raise AssertionError(f"deskdex {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)


def worded(results: dict) -> list[dict]:
    """A search's hits that hold the query's words: those meaning alone found follow them, marked
    ``related`` (docs/search.md, "Meaning"; tests/test_related.py tests them)."""
    return [h for h in results["hits"] if not h.get("related")]


def worded_lines(listing: str) -> list[str]:
    """``deskdex search``'s listing down to the heading of the hits related by meaning alone."""
    from deskdex.clients.render import RELATED

    lines = listing.splitlines()
    return lines[:lines.index(RELATED)] if RELATED in lines else lines


@pytest.fixture
def cli(home: Path) -> CLI:
    return CLI(home)


@pytest.fixture
def coll(tmp_path: Path) -> Iterator[Any]:
    """An empty writable collection in the test's folder (modules with collections of their own, built
    once per module, define their own ``coll``)."""
    from deskdex.index import Collection

    c = Collection.open(str(tmp_path / "data"), writable=True)
    yield c
    c.close()


def need_corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not built at {CORPUS}: run ../shared/corpus/build.sh")
    return CORPUS


def make_pdf(path: Path, title: str, author: str, paragraphs: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_author(author)
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    for para in paragraphs:
        pdf.multi_cell(0, 8, para)
        pdf.ln(8)
    pdf.output(str(path))
    return path


def make_docx(path: Path, title: str, author: str, heading: str, paragraphs: list[str],
              table: list[list[str]] | None = None) -> Path:
    import docx

    d = docx.Document()
    d.core_properties.title = title
    d.core_properties.author = author
    d.add_heading(heading, level=1)
    for para in paragraphs:
        d.add_paragraph(para)
    if table:
        t = d.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    d.save(str(path))
    return path


def text_collection(data: Path, docs: list[tuple[str, str, str]], mtime: float) -> Any:
    """A read-only Collection at ``data`` holding plain-text documents ``(path, title, body)``, each
    one block, put straight into the index (no conversion): for ranking tests."""
    from deskdex.converters import Block, Document
    from deskdex.index import Collection, Row

    with Collection.open(str(data), writable=True) as c:
        for path, title, body in docs:
            doc = Document(uri="file://" + path, mime="text/plain", title=title, blocks=[Block.of("p", body)])
            c.put(Row(uri="file://" + path, path=path, size=len(body), mtime=mtime), doc)
    return Collection.open(str(data))


# `make test` runs the suite in two pytest-xdist processes (--dist loadgroup): the wall clock is mostly
# waiting on daemons and workers, so two processes nearly halve it (docs/development.md). Each module is
# one group, so its module-scoped fixtures are built once. The modules that make Unix accounts or run a
# `--system` daemon share one group, hence one process: a system daemon follows /etc/passwd and pauses
# its intake while an account change is waiting, so accounts added and removed by a test running beside
# it would slow or break it. Matched on the module's text so that a new such module joins by itself.
_ACCOUNT_USE = re.compile(r'from \.accounts import|"--system"')
_account_modules: dict[Path, bool] = {}


def _uses_accounts(path: Path) -> bool:
    if path not in _account_modules:
        _account_modules[path] = bool(_ACCOUNT_USE.search(path.read_text(errors="replace")))
    return _account_modules[path]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        group = "accounts" if _uses_accounts(path) else path.stem
        item.add_marker(pytest.mark.xdist_group(group))


# What a `make` the suite runs must not inherit from the `make` that runs the suite: its command-line
# variables travel in MAKEFLAGS, so `make check PYTEST_MARKS=...` would narrow a test's own `make check`.
_MAKE_VARS = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def make_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment by default) without the outer make's variables."""
    return {k: v for k, v in (os.environ if base is None else base).items() if k not in _MAKE_VARS}
