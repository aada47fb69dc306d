"""Meaning search (issue 32; docs/search.md, "Meaning"): real files indexed by the installed ``deskdex``
command with the setting ``meaning`` on, the real model of the wordllama wheel, a real catalog and
tantivy index, and a real daemon answering the protocol's ``words`` argument.

Stands in for something: a socket guard (``socket.connect`` and name lookups that fail the test)
stands in for a machine without a network, and a copy of the wordllama package with a damaged or
missing weights file, first on PYTHONPATH, for a damaged install."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from deskdex.index.meaning import KEPT

from .conftest import CLI, DESKDEX, ROOT
from .daemon_fixture import DaemonProcess

DOCS = {
    "soup.txt": "Tomato soup\n\nChop two onions and three cloves of garlic, soften them in olive oil, add a kilo of "
                "ripe tomatoes, a pinch of salt and some basil. Simmer for twenty minutes, blend until smooth "
                "and serve hot with bread.\n",
    "car.txt": "Brake pads replaced on the Golf\n\nThe front brake pads were worn down to two millimetres. Jacked "
               "up the front axle, removed the wheels and the caliper bolts, pushed the piston back and fitted "
               "new pads. Torque the bolts to 27 Nm. The mechanic also topped up the brake fluid.\n",
    "tax.txt": "Income tax assessment 2025\n\nDear taxpayer, the revenue office has assessed your income for the "
               "year. The refund of 412 euros will be transferred to your bank account. Deductions for work "
               "equipment were accepted. You may file an objection within one month.\n",
    "garden.txt": "Garden plan\n\nPlant the roses along the south fence, the lavender near the path, and prune "
                  "the apple tree in February. Water the seedlings every morning.\n",
    # Holds the words of the exact-word query below, and nothing of its meaning.
    "dinner.txt": "Minutes of the club meeting\n\nThe cooking rota was agreed. Dinner tickets go on sale "
                  "in March; the treasurer reported the accounts.\n",
}

# Fails the process on any attempt to reach the network: connect() on an internet socket, or a
# name lookup. Unix sockets (the daemon's) stay allowed.
GUARD = """
import socket, sys
def _refuse(*a, **k):
    sys.stderr.write("NETWORK TOUCHED: %r\\n" % (a,))
    sys.exit(97)
_connect = socket.socket.connect
def _connect_guard(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _refuse(address)
    return _connect(self, address)
socket.socket.connect = _connect_guard
socket.socket.connect_ex = _connect_guard
socket.getaddrinfo = _refuse
socket.create_connection = _refuse
"""


def names(results: dict) -> list[str]:
    return [os.path.basename(h["path"]) for h in results["hits"]]


def write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    return folder


def configure(home: Path, text: str) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text(text)


def run_guarded(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``deskdex`` script run under the socket guard."""
    code = GUARD + f"import runpy; sys.argv = {[DESKDEX, *args]!r}; runpy.run_path({DESKDEX!r}, run_name='__main__')"
    env = dict(os.environ, DESKDEX_HOME=str(home), NO_COLOR="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> CLI:
    """One home, its folder indexed with meaning on, by the installed command under the socket guard:
    loading the model and embedding touch no network."""
    base = tmp_path_factory.mktemp("meaning")
    docs = write_docs(base / "docs")
    home = base / "home"
    configure(home, "meaning = true\n")
    p = run_guarded(home, "index", str(docs))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "NETWORK TOUCHED" not in p.stderr
    return CLI(home)


def test_a_query_by_meaning_finds_the_document_without_its_words(indexed: CLI):
    assert names(indexed.json("search", "cooking", "supper"))[:1] == ["soup.txt"]
    assert names(indexed.json("search", "vehicle", "maintenance"))[:1] == ["car.txt"]
    # --words: by the words alone, which no document holds.
    assert indexed.json("search", "cooking", "supper", "--words")["hits"] == []


def test_an_exact_word_query_keeps_the_document_with_the_words_first(indexed: CLI):
    # dinner.txt holds both words; soup.txt is nearer in meaning but holds neither.
    res = indexed.json("search", "cooking", "dinner")
    assert names(res)[0] == "dinner.txt"
    assert "soup.txt" in names(res)  # found by meaning too, below it
    assert names(indexed.json("search", "brake"))[0] == "car.txt"


def test_the_words_hits_rank_as_they_do_without_meaning(indexed: CLI):
    # Meaning adds documents after the words' hits and never reorders these.
    for query in (["cooking", "dinner"], ["the"], ["brake", "pads"]):
        words = names(indexed.json("search", *query, "--words"))
        both = names(indexed.json("search", *query))
        assert words and both[:len(words)] == words, (query, words, both)
    assert len(names(indexed.json("search", "cooking", "dinner"))) > 1  # soup.txt came after dinner.txt


def test_a_query_with_a_filter_is_not_fused(indexed: CLI):
    # A filter asks for what the words say: meaning adds nothing that does not match them.
    assert indexed.json("search", "cooking", "supper", "ext:txt")["hits"] == []


def test_vectors_are_stored_once_per_text_and_dropped_when_the_setting_is_off(indexed: CLI, tmp_path: Path):
    catalog = indexed.home / "data" / "catalog.sqlite"
    with sqlite3.connect(catalog) as db:
        rows = db.execute("SELECT count(*), min(length(vecs)) FROM meaning").fetchone()
    assert rows[0] == len(DOCS) and rows[1] == KEPT  # the title, name and text: one passage each

    # The same files in another home with the setting off: no vectors at all.
    off = tmp_path / "off"
    configure(off, "meaning = false\n")  # said, whatever the default is
    CLI(off).run("index", str(write_docs(tmp_path / "docs")))
    with sqlite3.connect(off / "data" / "catalog.sqlite") as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name='meaning'").fetchone() is None
    assert CLI(off).json("search", "cooking", "supper")["hits"] == []

    # Turned off for an index that has vectors: the next writer drops them.
    was_on = tmp_path / "was_on"
    shutil.copytree(indexed.home / "data", was_on / "data")
    configure(was_on, "meaning = false\n")
    CLI(was_on).run("index", str(tmp_path / "docs"))
    with sqlite3.connect(was_on / "data" / "catalog.sqlite") as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name='meaning'").fetchone() is None


def test_a_copy_shares_its_texts_vectors(tmp_path: Path):
    home = tmp_path / "home"
    configure(home, "meaning = true\n")
    docs = write_docs(tmp_path / "docs")
    (docs / "soup copy.txt").write_text(DOCS["soup.txt"])
    CLI(home).run("index", str(docs))
    with sqlite3.connect(home / "data" / "catalog.sqlite") as db:
        assert db.execute("SELECT count(*) FROM meaning").fetchone()[0] == len(DOCS)
    assert set(names(CLI(home).json("search", "cooking", "supper", "--all"))[:2]) == {"soup.txt", "soup copy.txt"}


def test_an_index_made_without_meaning_gets_its_vectors_when_it_is_turned_on(tmp_path: Path):
    home = tmp_path / "home"
    docs = write_docs(tmp_path / "docs")
    configure(home, "meaning = false\n")
    CLI(home).run("index", str(docs))  # no vectors
    assert CLI(home).json("search", "cooking", "supper")["hits"] == []
    configure(home, "meaning = true\n")
    CLI(home).run("index", str(docs))  # nothing changed on disk: the texts stored get their vectors
    with sqlite3.connect(home / "data" / "catalog.sqlite") as db:
        assert db.execute("SELECT count(*), min(length(vecs)) FROM meaning").fetchone() == (len(DOCS), KEPT)
        # Done: the next passes do not look for texts without vectors again.
        assert db.execute("SELECT 1 FROM meta WHERE key='meaning_backfill'").fetchone() is None
    assert names(CLI(home).json("search", "cooking", "supper"))[:1] == ["soup.txt"]


def test_vectors_an_earlier_release_kept_are_made_again(indexed: CLI, tmp_path: Path):
    # The first release of meaning kept 256 dimensions keyed by the checksum's text: searched with
    # this release's vectors they would mean nothing, so the next writer makes them again.
    home = tmp_path / "home"
    shutil.copytree(indexed.home / "data", home / "data")
    configure(home, "meaning = true\n")
    with sqlite3.connect(home / "data" / "catalog.sqlite") as db:
        blobs = [b for (b,) in db.execute("SELECT DISTINCT blob FROM docs WHERE blob IS NOT NULL")]
        db.execute("DROP TABLE meaning")
        db.execute("CREATE TABLE meaning(blob TEXT PRIMARY KEY, vecs BLOB NOT NULL)")
        db.executemany("INSERT INTO meaning VALUES(?, ?)", [(b, bytes(256)) for b in blobs])
    CLI(home).run("index", str(tmp_path / "docs") if (tmp_path / "docs").exists() else str(write_docs(tmp_path / "docs")))
    with sqlite3.connect(home / "data" / "catalog.sqlite") as db:
        assert [r[1] for r in db.execute("PRAGMA table_info(meaning)")] == ["id", "blob", "vecs"]
        assert db.execute("SELECT count(*), min(length(vecs)) FROM meaning").fetchone() == (len(DOCS), KEPT)
    assert names(CLI(home).json("search", "cooking", "supper"))[:1] == ["soup.txt"]


def test_the_socket_guard_catches_a_connection():
    # What makes the fixture's "no network" check able to fail: a connection attempt ends the process.
    code = GUARD + "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9', timeout=2)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 97 and "NETWORK TOUCHED" in p.stderr


def test_the_daemon_answers_words_and_meaning(indexed: CLI, tmp_path: Path):
    home = tmp_path / "dhome"
    shutil.copytree(indexed.home / "data", home / "data")
    docs = tmp_path / "docs"
    write_docs(docs)
    d = DaemonProcess(home, [docs], extra_config="meaning = true\n").start()
    try:
        assert names(d.call("search", query="cooking supper"))[:1] == ["soup.txt"]
        assert d.call("search", query="cooking supper", words=True)["hits"] == []
    finally:
        d.stop()


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_damaged_model_is_one_clear_error_at_start(tmp_path: Path, damage: str):
    import wordllama

    real = Path(wordllama.__file__).parent
    fake = tmp_path / "site" / "wordllama"
    (fake / "weights").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    shutil.copytree(real / "tokenizers", fake / "tokenizers")
    weights = fake / "weights" / "l2_supercat_256.safetensors"
    if damage == "corrupt":
        data = (real / "weights" / "l2_supercat_256.safetensors").read_bytes()
        weights.write_bytes(data[:4096])  # cut short, as a disk that filled up leaves it
    home = tmp_path / "home"
    configure(home, "meaning = true\n")
    docs = write_docs(tmp_path / "docs")
    env = dict(os.environ, DESKDEX_HOME=str(home), NO_COLOR="1", PYTHONPATH=str(tmp_path / "site"))
    p = subprocess.run([DESKDEX, "index", str(docs)], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and str(weights) in p.stderr
    assert ("missing" if damage == "missing" else "cannot read") in p.stderr
    assert not (home / "data" / "catalog.sqlite").exists() or json.loads(
        CLI(home).run("status", "--json").stdout)["documents"] == 0


def test_a_searcher_sees_every_change_of_the_vectors_without_counting_them(tmp_path: Path):
    """The vectors a searching process holds are read again when a row was written or dropped,
    told by the last row's number and a count of drops (index/meaning.py ``_version``), not by a
    count(*) that reads the whole table at every search."""
    from deskdex.index import meaning

    db = sqlite3.connect(tmp_path / "catalog.sqlite")
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE docs(blob TEXT, status TEXT)")
    meaning.create(db)
    vectors = meaning.MeaningVectors()
    one = bytes([1] * KEPT)

    def write(blob: str) -> None:
        db.execute("INSERT INTO docs VALUES(?, 'ok')", (blob,))
        db.execute("INSERT INTO meaning(blob, vecs) VALUES(?, ?)", (bytes.fromhex(blob), one))

    write("aa" * 16)
    write("bb" * 16)
    first = vectors._load("x", db)
    assert first is not None and first.blobs == ["aa" * 16, "bb" * 16]
    assert vectors._load("x", db) is first  # nothing changed: held as it is
    # The first row dropped: the last number is the same, the count of drops is not.
    db.execute("DELETE FROM docs WHERE blob=?", ("aa" * 16,))
    assert meaning.collect_garbage(db) == 1
    again = vectors._load("x", db)
    assert again is not None and again.blobs == ["bb" * 16]
    write("cc" * 16)  # a row written: a new last number
    last = vectors._load("x", db)
    assert last is not None and last.blobs == ["bb" * 16, "cc" * 16]


def test_a_writers_stored_vectors_are_the_unit_vectors_rounded():
    """``Model.codes`` (a writer's: the word cache, the table in memory, one rounding per passage)
    gives the bytes ``embed`` rounds to, whether a word is met for the first time or again, and a
    query's vectors (the mapped file) are the same to float rounding."""
    import numpy as np

    from deskdex.index import meaning

    m = meaning.Model(*meaning._files())
    texts = [DOCS["soup.txt"], DOCS["car.txt"], "", "  ", "naïve co-operation, 2024-12-06 日本語 Ünïcödé",
             DOCS["soup.txt"] + " " + DOCS["tax.txt"]]
    words = [t.split() for t in texts]
    cold = m.codes(words)  # every word new to the cache
    warm = m.codes(words)  # every word cached
    assert cold == warm and len(cold) == len(texts) * KEPT
    dense = m.embed(texts, dense=True)
    assert cold == np.rint(dense * meaning.SCALE).astype(np.int8).tobytes()
    assert np.abs(dense - m.embed(texts)).max() < 1e-6
    assert not dense[2].any() and not dense[3].any()  # no words: zeros
    assert np.allclose(np.linalg.norm(dense[[0, 1, 4, 5]], axis=1), 1.0, atol=1e-5)
    m.release_memory()  # an idle daemon's: the cache is dropped, the vectors stay the same
    assert m.codes(words) == cold
    # A writer embeds each text's passages as lists of words: those the passages' text splits into.
    for text, title, name in ((DOCS["car.txt"], "Brake pads", "car.txt"), (" ".join(["word"] * 1000), "", "long.txt"),
                              ("", "", ""), ("", "  A title\n", ""), (DOCS["tax.txt"], "", "")):
        assert [p.split() for p in meaning.passages(text, title, name)] == meaning._passage_words(text, title, name)


def test_a_new_catalog_needs_no_backfill_and_one_with_texts_does(tmp_path: Path):
    """The table made in a catalog without stored texts: no flag, so the pass does not scan every
    document for texts without vectors (each text a writer with meaning on takes gets its row).
    Made in a catalog with texts (meaning was off, or an earlier release's table was dropped): the
    flag is set and the next pass embeds them (the CLI test above shows the whole round)."""
    from deskdex.index import meaning

    db = sqlite3.connect(tmp_path / "catalog.sqlite")
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE docs(blob TEXT, status TEXT, path TEXT, uri TEXT)")
    db.execute("INSERT INTO docs VALUES(NULL, 'failed', '/n/bad.pdf', 'file:///n/bad.pdf')")  # a failure stores no text
    meaning.create(db)
    assert not meaning.backfill_due(db)
    meaning.drop_all(db)  # meaning turned off, then texts stored, then on again
    db.execute("INSERT INTO docs VALUES(?, 'ok', '/n/a.txt', 'file:///n/a.txt')", ("aa" * 16,))
    meaning.create(db)
    assert meaning.backfill_due(db)
    assert meaning.missing(db) == [("aa" * 16, "a.txt")]


def test_a_long_text_is_embedded_from_its_first_words_without_splitting_all_of_it():
    """The writer embeds at most PASSAGE_WORDS * MAX_PASSAGES words of a text's first TEXT_CHARS
    characters: they are split from a prefix (``_first_words``), which gives the words
    ``text.split()`` gives, whatever the spacing (these texts' first 1,200 words are all within it)."""
    import random

    from deskdex.index.meaning import MAX_PASSAGES, PASSAGE_WORDS, TEXT_CHARS, _first_words, _passage_words

    # Past TEXT_CHARS nothing is read: the writer (Document.body_text's limit) and a backfill from the
    # stored text embed the same words.
    assert _first_words(" " * TEXT_CHARS + "late words", 10) == []
    assert _first_words(" " * (TEXT_CHARS - 6) + "early words", 10) == ["early"]

    rnd = random.Random(33)
    limit = PASSAGE_WORDS * MAX_PASSAGES
    for _ in range(500):
        words = ["".join(rnd.choice("abé日") for _ in range(rnd.randint(1, 30)))
                 for _ in range(rnd.choice([0, 1, PASSAGE_WORDS, limit - 1, limit, limit + 1, 3 * limit]))]
        gaps = [rnd.choice([" ", "\n", " \t ", " " * rnd.randint(1, 300)]) for _ in range(len(words) + 1)]
        text = gaps[0] + "".join(w + g for w, g in zip(words, gaps[1:]))
        for n in (1, PASSAGE_WORDS, limit):
            assert _first_words(text, n) == text.split()[:n]
        # as from every word of the text: the title and name, then windows of the first words
        every = text.split()
        head = ["A", "title", "a.txt"]
        expected = [head + every] if len(every) <= PASSAGE_WORDS else \
            [head] + [every[i:i + PASSAGE_WORDS] for i in range(0, min(len(every), limit), PASSAGE_WORDS)]
        assert _passage_words(text, "A title", "a.txt") == expected
