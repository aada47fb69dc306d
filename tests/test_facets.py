"""Facets of a search (issue 30): the first matches counted by type, language, folder and year, each
value with the query-language filter that narrows the query to it. On a real index of a few dozen
files of several formats, folders, languages and years, every count equals what the search with
that filter finds; a reader's facets count what it may read alone; the socket's search takes the
argument."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from deskdex.converters import Block, Document
from deskdex.converters.limits import Limits
from deskdex.index import Collection, Row, narrowed, search, search_shards
from deskdex.pipeline.indexer import Indexer

from .conftest import make_pdf
from .daemon_fixture import DaemonProcess

ENGLISH = ("The harbour master keeps a ledger of every ship that comes into the harbour, with the name of "
           "its captain, its cargo and the day it leaves again for the open sea.")
GERMAN = ("Der Hafenmeister führt ein Buch über jedes Schiff, das in den Hafen harbour einläuft, mit dem Namen "
          "seines Kapitäns, seiner Ladung und dem Tag, an dem es wieder auf das offene Meer hinausfährt.")
FRENCH = ("Le capitaine du port tient un registre de chaque navire qui entre dans le port harbour, avec le nom "
          "de son capitaine, sa cargaison et le jour où il repart vers la haute mer.")


def when(year: int, month: int = 6) -> float:
    return dt.datetime(year, month, 15, 12, 0).timestamp()


def corpus(root: Path) -> None:
    """32 files: text, Markdown, HTML, CSV, source code, PDF and a format of no type group (found
    by its name), in nested folders (one with a space and brackets), in three languages, over
    four years."""
    files: list[tuple[str, str | bytes, int]] = []
    for i in range(8):
        files.append((f"notes/en{i}.txt", f"{ENGLISH} Entry {i}.\n", 2019 + i % 4))
    for i in range(5):
        files.append((f"notes/de/de{i}.txt", f"{GERMAN} Eintrag {i}.\n", 2020 + i % 2))
    for i in range(4):
        files.append((f"Old notes (fr)/fr{i}.md", f"# Registre {i}\n\n{FRENCH}\n", 2022))
    for i in range(3):
        files.append((f"web/page{i}.html", f"<html><head><title>Harbour page {i}</title></head><body><p>{ENGLISH}"
                                           f"</p></body></html>", 2021))
    for i in range(3):
        files.append((f"sheets/ships{i}.csv", f"ship,harbour,tonnes\nAurora,harbour {i},{100 + i}\n", 2023))
    for i in range(3):
        files.append((f"code/harbour{i}.py", f'"""The harbour ledger, version {i}."""\nSHIPS = {i}\n', 2020))
    for i in range(2):
        files.append((f"notes/harbour-{i}.xyzdata", bytes(range(256)) * 4, 2019))
    for i in range(4):
        files.append((f"reports/r{i}.pdf", b"", 2023 - i % 2))
    for rel, data, year in files:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".pdf"):
            make_pdf(p, f"Harbour report {rel[-5]}", "A. Clerk", [ENGLISH])
        elif isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data)
        os.utime(p, (when(year), when(year)))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("facets")
    root = tmp / "docs"
    corpus(root)
    with Collection.open(str(tmp / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        try:
            indexer.sync([str(root)], indexer.scan([str(root)]))
        finally:
            indexer.release()
    return root, tmp / "data"


@pytest.mark.parametrize("query", ["harbour", "harbour -tonnes", "ledger OR registre"])
def test_each_count_is_what_its_filter_finds(indexed: tuple[Path, Path], query: str) -> None:
    root, data = indexed
    with Collection.open(str(data)) as coll:
        got = search(coll, query, limit=5, facets=True)
        facets = got["facets"]
        every = search(coll, query, limit=1000, collapse=False, snippets=False)
        assert facets["counted"] == every["total"] == len(every["hits"])
        for name in ("type", "lang", "folder", "year"):
            values = facets[name]  # type: ignore[literal-required]
            assert values, name
            assert [(-v["count"], v["value"]) for v in values] == sorted((-v["count"], v["value"]) for v in values)
            for v in values:
                # Added as the web UI adds it: the query in parentheses (an OR binds looser than AND).
                found = search(coll, f"({query}) {v['filter']}", limit=1000, collapse=False, snippets=False)
                assert found["total"] == v["count"], (name, v)
        # Without the argument, no facets: the answer is as before.
        assert "facets" not in search(coll, query, limit=5)


def test_the_values_and_filters_of_a_known_corpus(indexed: tuple[Path, Path]) -> None:
    root, data = indexed
    with Collection.open(str(data)) as coll:
        facets = search(coll, "harbour", limit=1, facets=True)["facets"]
    types = {v["filter"]: v["count"] for v in facets["type"]}
    assert types["type:text"] == 17 and types["type:pdf"] == 4 and types["type:web"] == 3
    assert types["type:sheet"] == 3 and types["type:code"] == 3 and types["ext:xyzdata"] == 2
    assert {v["value"]: v["count"] for v in facets["lang"]}.keys() >= {"en", "de", "fr"}
    folders = {v["value"]: (v["count"], v["filter"]) for v in facets["folder"]}
    # A folder counts what it and the folders under it hold, as in: finds them.
    assert folders[str(root / "notes")][0] == 8 + 5 + 2 and folders[str(root / "notes" / "de")][0] == 5
    assert folders[str(root / "Old notes (fr)")] == (4, f'in:"{root / "Old notes (fr)"}"')
    years = {v["value"]: v for v in facets["year"]}
    assert years["2022"]["filter"] == "after:2022 before:2023"
    assert sum(v["count"] for v in facets["year"]) == facets["counted"] == 32
    assert len(facets["folder"]) <= 12


ALICE, BOB = 1001, 1002


def test_a_readers_facets_count_what_it_may_read_alone(tmp_path: Path) -> None:
    def put(coll: Collection, path: str, uid: int, mime: str, year: int) -> None:
        coll.put(Row(uri="file://" + path, path=path, size=10, mtime=when(year), mime=mime, title="t",
                     readers=json.dumps({"uids": [uid], "everyone": False})),
                 Document(uri="file://" + path, mime=mime, title="t", blocks=[Block.of("p", "okapi sightings")]))

    data = str(tmp_path / "data")
    with Collection.open(data, writable=True) as coll:
        for i in range(3):
            put(coll, f"/home/alice/a{i}.txt", ALICE, "text/plain", 2020)
        coll.commit()
    with Collection.open(data) as coll:
        before = search(coll, "okapi", reader=ALICE, facets=True)["facets"]
    with Collection.open(data, writable=True) as coll:
        for i in range(20):
            put(coll, f"/home/bob/b{i}.pdf", BOB, "application/pdf", 2024)
        coll.commit()
    with Collection.open(data) as coll:
        after = search(coll, "okapi", reader=ALICE, facets=True)["facets"]
        root = search(coll, "okapi", facets=True)["facets"]
    assert after == before and before["counted"] == 3
    assert before["type"] == [{"value": "text", "count": 3, "filter": "type:text"}]
    assert root["counted"] == 23 and root["type"][0] == {"value": "pdf", "count": 20, "filter": "type:pdf"}


def test_shards_on_this_machine_add_up(tmp_path: Path) -> None:
    def put(data: str, names: list[str], mime: str, year: int) -> None:
        with Collection.open(data, writable=True) as coll:
            for name in names:
                path = f"/srv/{name}"
                coll.put(Row(uri="file://" + path, path=path, size=10, mtime=when(year), mime=mime, title=name),
                         Document(uri="file://" + path, mime=mime, title=name, blocks=[Block.of("p", "okapi " + name)]))
            coll.commit()

    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    put(one, ["a.txt", "b.txt"], "text/plain", 2021)
    put(two, ["c.pdf"], "application/pdf", 2022)
    with Collection.open(one) as c1, Collection.open(two) as c2:
        facets = search_shards([c1, c2], "okapi", facets=True)["facets"]
        assert "facets" not in search_shards([c1, c2], "okapi")
    assert facets["counted"] == 3
    assert facets["type"] == [{"value": "text", "count": 2, "filter": "type:text"},
                              {"value": "pdf", "count": 1, "filter": "type:pdf"}]
    assert [(v["value"], v["count"]) for v in facets["year"]] == [("2021", 2), ("2022", 1)]


@pytest.mark.slow  # a daemon
def test_the_search_op_answers_facets(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"n{i}.txt").write_text(f"{ENGLISH} {i}\n")
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        got = d.call("search", query="harbour", facets=True)
        assert got["facets"]["counted"] == 3
        assert got["facets"]["folder"] == [{"value": str(docs), "count": 3, "filter": f'in:"{docs}"'}]
        assert "facets" not in d.call("search", query="harbour")
    finally:
        d.stop()


def test_a_filter_narrows_the_query_as_written() -> None:
    """One narrowing for the web page's facet links and the tray's filters (index.narrowed): an OR
    binds looser than the AND a filter is joined with, so an OR query is put in parentheses; a
    filter the query has already is not added twice."""
    assert narrowed(" budget ", ["type:sheet"]) == "budget type:sheet"
    assert narrowed("budget OR ledger", ["type:sheet", "year:2024"]) == "(budget OR ledger) type:sheet year:2024"
    assert narrowed("budget type:sheet", ["type:sheet"]) == "budget type:sheet"
    assert narrowed("", ["type:pdf"]) == "type:pdf"
    assert narrowed("oregon", []) == "oregon"
