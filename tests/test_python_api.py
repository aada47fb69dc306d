"""The Python API (issue 31, docs/python-api.md): ``deskdex.search``, ``document``, ``similar``,
``duplicates`` and ``status`` as installed (the editable install `make` uses; the wheel in a fresh
venv is tests/test_installed.py's), on an index built by the ``deskdex index`` command and read
directly, and through a real daemon's socket. ``import deskdex`` alone loads nothing of it.

Nothing is mocked. To know that an answer came through the socket, the API is also given a home
that holds no index but whose socket folder is the daemon's (a link): reading the index directly
there could only fail with IndexMissing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import FrozenInstanceError
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

import deskdex
from deskdex.errors import BadArgs, ConfigError, DeskdexError, IndexMissing, NotFound, QueryError
from deskdex.paths import path_to_uri

from .conftest import DESKDEX, ROOT
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .test_dups_cli import text
from .test_pages import three_page_pdf

# Long enough for near-duplicates (index/neardup.py fingerprints a text of some length).
SOUP = "Tomato soup with basil and a little cream, simmered for an hour.\n\n" + text(1) + "\n"


class Setup(NamedTuple):
    docs: Path
    indexed: Path  # a home indexed by `deskdex index`, no daemon
    daemon: DaemonProcess  # the daemon of another home, watching docs
    through: Path  # no index of its own; its socket folder is the daemon's


def write_docs(docs: Path) -> None:
    docs.mkdir()
    (docs / "soup.txt").write_text(SOUP)
    (docs / "soup copy.txt").write_text(SOUP)  # identical: one hit standing for two
    (docs / "garden.md").write_text("# Garden\n\nCucumbers climb the fence in July; the budget for seeds is small.\n")
    (docs / "budget.csv").write_text("item,cost\nbudget for rent,900\nbudget for seeds,12\n")
    (docs / "birds.pdf").write_bytes(three_page_pdf())


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("api")
    docs = tmp / "docs"
    write_docs(docs)
    indexed = tmp / "indexed"
    proc = subprocess.run([DESKDEX, "index", str(docs), "--json", "--no-progress"], capture_output=True, text=True,
                          env=dict(os.environ, DESKDEX_HOME=str(indexed)), timeout=300, cwd=ROOT)
    assert proc.returncode == 0 and sum(json.loads(proc.stdout)[k] for k in ("indexed", "reused")) == 5, proc.stdout + proc.stderr
    daemon = DaemonProcess(tmp / "daemon-home", [docs]).start()
    try:
        daemon.wait_for(lambda st: st["documents"] == 5, what="the five documents")
        through = tmp / "through"
        through.mkdir()
        (through / "run").symlink_to(daemon.home / "run")
        yield Setup(docs, indexed, daemon, through)
    finally:
        daemon.stop()


def cli_search(home: Path, *args: str) -> dict:
    proc = subprocess.run([DESKDEX, "search", *args, "--json"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, DESKDEX_HOME=str(home)), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_import_deskdex_loads_nothing_more() -> None:
    """The ``deskdex`` command's fast path imports the package: the API's names cost nothing until used."""
    code = ("import json, sys; before = set(sys.modules); import deskdex; light = sorted(set(sys.modules) - before)\n"
            "found = deskdex.search\n"
            "print(json.dumps([light, 'deskdex.clients.api' in sys.modules, found.__module__]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         cwd="/").stdout
    # __future__: the `from __future__ import annotations` of lazy.py, a module of a few names
    assert json.loads(out) == [["__future__", "deskdex", "deskdex.lazy"], True, "deskdex.clients.api"]
    for name in deskdex.__all__:  # each public name is there, and is the API module's
        assert getattr(deskdex, name) is getattr(deskdex.clients.api, name)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'serch'"):
        deskdex.serch  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.slow  # a daemon
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_search_reads_the_index_as_the_command_does(setup: Setup) -> None:
    results = deskdex.search("tomato", home=setup.indexed)
    # total: every match, as the command counts them, the copy a hit stands for included
    assert isinstance(results, deskdex.Results) and len(results) == 1 and results.total == 2
    (hit,) = results
    assert hit is results[0] and isinstance(hit, deskdex.Hit) and results[:5] == (hit,) and hit in results
    soup = setup.docs / "soup.txt" if hit.path.endswith("soup.txt") else setup.docs / "soup copy.txt"
    assert (hit.path, hit.uri, hit.mime, hit.ext, hit.source) == (str(soup), path_to_uri(str(soup)), "text/plain",
                                                                   "txt", "files")
    assert hit.size == soup.stat().st_size and hit.duplicates == 1 and hit.page is None and hit.type == "text"
    assert hit.mtime == datetime.fromtimestamp(int(soup.stat().st_mtime), tz=timezone.utc)
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["Tomato"]
    with pytest.raises(FrozenInstanceError):
        hit.title = "changed"  # type: ignore[misc]
    # The command's own answer, hit for hit (its JSON), for a few queries and options.
    for query, kw, argv in [("tomato", {"all": True}, ["--all"]), ("budget", {"sort": "size"}, ["--sort", "size"]),
                            ("budget type:sheet", {"limit": 20}, ["--limit", "20"])]:
        got = deskdex.search(query, home=setup.indexed, **kw)  # type: ignore[arg-type]
        shown = cli_search(setup.indexed, query, *argv)
        assert [(h.uri, h.score, h.snippet) for h in got] == [(h["uri"], h["score"], h["snippet"]) for h in shown["hits"]]
        assert got.total == shown["total"]
    sheets = deskdex.search("budget type:sheet", home=setup.indexed)
    assert [(h.path, h.type) for h in sheets] == [(str(setup.docs / "budget.csv"), "sheet")]
    assert len(deskdex.search("tomato", all=True, home=setup.indexed)) == 2
    paged = deskdex.search("bitterns", home=setup.indexed)
    assert [(h.path, h.page) for h in paged] == [(str(setup.docs / "birds.pdf"), 2)]


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_through_the_daemon(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    direct = deskdex.search("budget", home=setup.indexed)
    got = deskdex.search("budget", home=setup.through)
    assert [h.path for h in got] == [h.path for h in direct] and len(got) == 2
    st = deskdex.status(home=setup.through)
    assert st.daemon and st.details["pid"] == setup.daemon.proc.pid and st.documents == 5  # type: ignore[union-attr]
    assert st.state == "idle" and st.queue == 0 and st.failed == 0 and st.last_commit is not None
    doc = deskdex.document(setup.docs / "garden.md", query="cucumbers", home=setup.through)
    assert doc.title == "Garden" and "Cucumbers climb the fence" in doc.text
    with pytest.raises(NotFound, match="not in the index: /nowhere/at-all.txt"):
        deskdex.document("/nowhere/at-all.txt", home=setup.through)
    with pytest.raises(QueryError) as err:
        deskdex.search("fox )", home=setup.through)
    assert err.value.position == 4
    # No home given: $DESKDEX_HOME's, as for the command.
    monkeypatch.setenv("DESKDEX_HOME", str(setup.through))
    assert [h.path for h in deskdex.search("budget")] == [h.path for h in got]


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_document_text_marks_and_pages(setup: Setup) -> None:
    garden = setup.docs / "garden.md"
    doc = deskdex.document(garden, query="cucumbers OR seeds", home=setup.indexed)
    assert (doc.path, doc.uri, doc.title, doc.mime, doc.pages) == (str(garden), path_to_uri(str(garden)), "Garden",
                                                                   "text/markdown", None)
    assert doc.size == garden.stat().st_size and not doc.truncated
    assert doc.text.splitlines() == ["Garden", "Cucumbers climb the fence in July; the budget for seeds is small."]
    assert [[b.text[s:e] for s, e in b.marks] for b in doc.blocks] == [[], ["Cucumbers", "seeds"]]
    assert deskdex.document(doc.uri, home=setup.indexed).text == doc.text  # by its URI too
    os.chdir(setup.docs)  # a relative path is the working folder's, as for `deskdex show`
    try:
        birds = deskdex.document("birds.pdf", home=setup.indexed)
    finally:
        os.chdir(ROOT)
    assert birds.pages == 3 and [b.page for b in birds.blocks if "second page" in b.text] == [2]
    assert deskdex.document(garden, home=setup.through) == deskdex.document(garden, home=setup.indexed)
    with pytest.raises(NotFound, match=f"not in the index: {setup.docs}/absent.txt$"):
        deskdex.document(setup.docs / "absent.txt", home=setup.indexed)


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_similar_lists_the_cluster_but_the_document(setup: Setup) -> None:
    soup, copy = setup.docs / "soup.txt", setup.docs / "soup copy.txt"
    for home in (setup.indexed, setup.through):
        got = deskdex.similar(soup, home=home)
        assert [h.path for h in got] == [str(copy)] and got.total == 1
        alone = deskdex.similar(setup.docs / "garden.md", home=home)
        assert (list(alone), alone.total) == ([], 0)
        with pytest.raises(NotFound, match="not in the index: .*nothing.txt"):
            deskdex.similar(setup.docs / "nothing.txt", home=home)


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_duplicates_of_a_file_not_indexed(setup: Setup, tmp_path: Path) -> None:
    draft = tmp_path / "draft.txt"
    draft.write_text(SOUP.replace("an hour", "an hour and a half"))
    for home in (setup.indexed, setup.through):
        found = deskdex.duplicates(draft, home=home)
        assert sorted(d.path for d in found) == [str(setup.docs / "soup copy.txt"), str(setup.docs / "soup.txt")]
        assert all(isinstance(d, deskdex.Duplicate) and 0.5 < d.similarity < 1 for d in found), found
    with pytest.raises(NotFound, match=f"no such file: {tmp_path}/gone.txt"):
        deskdex.duplicates(tmp_path / "gone.txt", home=setup.indexed)
    with pytest.raises(NotFound, match="is a folder"):
        deskdex.duplicates(tmp_path, home=setup.indexed)


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_bad_queries_and_arguments_say_what(setup: Setup) -> None:
    with pytest.raises(QueryError, match="never closed") as err:
        deskdex.search("(fox OR cat", home=setup.indexed)
    assert err.value.position == 0
    with pytest.raises(QueryError, match="unknown type") as err:
        deskdex.document(setup.docs / "garden.md", query="type:music", home=setup.indexed)
    assert err.value.position == 5
    for home in (setup.indexed, setup.through):  # refused before the daemon is asked, the same either way
        with pytest.raises(BadArgs, match="limit must be at least 1, not 0"):
            deskdex.search("tomato", limit=0, home=home)
        with pytest.raises(BadArgs, match="sort must be one of relevance, date, size, not 'name'"):
            deskdex.search("tomato", sort="name", home=home)


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_a_search_during_the_first_index_says_how_far(tmp_path: Path) -> None:
    """A daemon in its first index (cpu_budget = 1: it rests about 99 times as long as it worked,
    tests/test_first_contact.py) answers with how far it is, which the results carry in the
    command's words: a script can tell "none yet" from "none"."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(1500):  # more than a daemon converts in the half second before it first rests
        (docs / f"note{i:04}.txt").write_text(f"kestrel sighting number {i}\n")
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="cpu_budget = 1\n").start(wait=False)
    try:
        d.wait_for(lambda st: st["state"] == "indexing" and st["queue"] > 0, what="the first index under way")
        got = deskdex.search("kestrel", home=d.home)
        assert got.indexing is not None and got.indexing.startswith("the index is being built: "), got.indexing
        assert deskdex.status(home=d.home).state == "indexing"
    finally:
        d.stop()
    assert deskdex.search("kestrel", home=d.home).indexing is None  # read from the index: nothing said


def test_no_index_yet(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    with pytest.raises(IndexMissing, match=f"nothing indexed yet under {empty}/data: run `deskdex index PATH` first"):
        deskdex.search("tomato", home=empty)
    with pytest.raises(IndexMissing):
        deskdex.document(tmp_path / "a.txt", home=empty)
    with pytest.raises(IndexMissing):
        deskdex.similar(tmp_path / "a.txt", home=empty)
    st = deskdex.status(home=empty)  # no error: it says so
    assert (st.daemon, st.documents, st.failed, st.last_commit) == (False, 0, 0, None)
    assert any("nothing indexed yet" in note for note in st.notes), st.notes
    assert st.data_dir == str(empty / "data")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="it is a file"):
        deskdex.search("tomato", home=a_file)
    assert issubclass(IndexMissing, DeskdexError) and issubclass(NotFound, DeskdexError)
