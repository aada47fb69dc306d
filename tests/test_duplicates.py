"""DuplicateIndex, the facade the pipeline calls, on a real SQLite file."""

from __future__ import annotations

import random
import sqlite3

import pytest

from deskdex.index.checksums import text_checksum
from deskdex.index.duplicates import DuplicateIndex

VOCAB = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "ve", "zo", "pa", "ri")
         for b in ("ran", "del", "mos", "tik", "bor", "fen", "gul", "hap", "jor", "wex", "yil", "cos")]


def prose(n: int, seed: int) -> str:
    rng = random.Random(seed)
    sentences = []
    while sum(len(s.split()) for s in sentences) < n:
        sentences.append(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(6, 14))).capitalize() + ".")
    return "\n".join(sentences)


@pytest.fixture
def conn(tmp_path):
    c = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None)
    yield c
    c.close()


def test_edits_cluster_and_other_texts_do_not(conn):
    dx = DuplicateIndex(conn)
    a = prose(600, 1)
    dx.add(1, a)
    dx.add(2, "Draft of 3 May 2024, printed by Ann\n" + a)  # a header added
    dx.add(3, a.replace("Ka", "Lo", 2) + "\nOne more closing sentence here.")  # small edits
    dx.add(4, prose(600, 2))
    assert dx.clusters() == [[1, 2, 3]]
    assert dx.cluster_of(4) == 4
    sims = dict(dx.similar(1))
    assert set(sims) == {2, 3} and all(0.8 < s <= 1.0 for s in sims.values())


def test_exact_copies_in_other_formats_cluster(conn):
    dx = DuplicateIndex(conn)
    text = prose(300, 3)
    dx.add(1, text)
    dx.add(2, text.upper().replace("\n", "  "))  # same words after normalisation: as PDF vs DOCX
    dx.add(3, "tiny note", text_sum=text_checksum("tiny note"))
    dx.add(4, "Tiny   NOTE")  # exact copy of a short text: exact checksum only
    assert dx.clusters() == [[1, 2], [3, 4]]
    assert dx.near(text)[:2] == [(1, 1.0), (2, 1.0)]


def test_short_numeric_empty_and_boilerplate_only_never_near_cluster(conn):
    dx = DuplicateIndex(conn)
    nav = prose(200, 9)  # a site's navigation: lots of words, all boilerplate
    docs = {
        1: ("", ""), 2: ("", ""),  # empty: not even an exact cluster
        3: ("hello", ""), 4: ("hello world", ""),
        5: (" ".join(str(i) for i in range(400)), ""),
        6: (" ".join(str(i * 7) for i in range(400)), ""),
        7: ("", nav + "\nHome"), 8: ("", nav + "\nAbout"),  # same template, no content
        9: ("Short page one.", nav), 10: ("Short page two.", nav),
        11: (prose(300, 10), ""),
    }
    for d, (main, boiler) in docs.items():
        dx.add(d, main, boiler)
    assert dx.clusters() == []
    assert dx.near("") == [] and dx.near("hello there") == []


def test_template_pages_with_different_content_stay_apart(conn):
    """Pages whose template was not recognised as boilerplate (a third of their words): simhash
    alone would merge some, the fingerprints see how little text they really share. (A template
    of three quarters of the words does merge at the default threshold: docs/duplicates.md.)"""
    dx = DuplicateIndex(conn, k=10)  # a wide simhash net, so the fingerprints must do the work
    template = prose(200, 20)
    for d in range(1, 9):
        dx.add(d, template + "\n" + prose(400, 100 + d))
    assert dx.tables.search(dx.tables.get(1))[1:], "simhash alone finds the template pages close"
    assert dx.clusters() == []


def test_changed_document_keeps_no_stale_membership(conn):
    dx = DuplicateIndex(conn)
    a, b = prose(500, 30), prose(500, 31)
    dx.add(1, a)
    dx.add(2, a + "\nA last line.")
    dx.add(3, b)
    assert dx.clusters() == [[1, 2]]
    ch = dx.add(2, b + "\nA last line.")  # document 2 was edited into a copy of 3
    assert dx.clusters() == [[2, 3]]
    assert ch.changed == {2: 2, 3: 2}
    ch = dx.add(2, prose(500, 32))  # and then into something new
    assert dx.clusters() == [] and ch.changed == {3: 3}
    assert dx.near(a) == [(1, 1.0)]


def test_bridge_removal_splits_and_reports(conn):
    dx = DuplicateIndex(conn, k=6, min_similarity=0.6)
    base = prose(1200, 40).split("\n")
    n = len(base)
    left = "\n".join(base[:int(n * 0.7)] + [prose(60, 41)])  # 65% in common with base,
    right = "\n".join([prose(60, 42)] + base[int(n * 0.3):])  # this too, but 36% with left
    dx.add(10, left)
    dx.add(20, right)
    assert dx.clusters() == []
    dx.add(5, "\n".join(base))  # shares most of its text with each
    assert dx.clusters() == [[5, 10, 20]]
    ch = dx.remove(5)
    assert dx.clusters() == [] and ch.removed == {5} and ch.changed == {10: 10, 20: 20}


def test_persisted_and_rebuilt_on_new_thresholds(tmp_path):
    path = tmp_path / "catalog.db"
    conn = sqlite3.connect(path)
    dx = DuplicateIndex(conn, k=8, min_similarity=0.5)
    a = prose(400, 50)
    b = a + "\n" + prose(150, 51)  # about 70% of b is a
    dx.add(1, a)
    dx.add(2, b)
    dx.add(3, prose(400, 52))
    conn.commit()
    conn.close()
    conn = sqlite3.connect(path)
    assert DuplicateIndex(conn, k=8, min_similarity=0.5).clusters() == [[1, 2]]
    strict = DuplicateIndex(conn, k=8, min_similarity=0.95)
    assert strict.clusters() == [] and strict.rebuilt.changed == {2: 2}
    assert DuplicateIndex(conn, k=8, min_similarity=0.5).clusters() == [[1, 2]]


def test_the_exact_key_of_a_long_text_is_read_in_pieces_and_the_same(monkeypatch):
    """A text past FEATURE_CHARS has its exact key computed a piece at a time: it must be the key
    of the whole text, wherever the pieces end (a space, a newline, a long run without either,
    a combining mark after the cut)."""
    import random

    from deskdex.index import checksums
    from deskdex.index.checksums import bytes_checksum, words_checksum

    monkeypatch.setattr(checksums, "CHUNK_CHARS", 37)
    rnd = random.Random(3)
    pieces = ["word", "Straße", "e\u0301t\u00e9", "\n", " ", "x" * 120, "3.14", "ﬁle", "\u0301", "  ", "Ὀδυσσεύς"]
    for _ in range(200):
        text = "".join(rnd.choice(pieces) + rnd.choice([" ", "", "\n"]) for _ in range(rnd.randrange(0, 60)))
        boiler = "".join(rnd.choice(pieces) + " " for _ in range(rnd.randrange(0, 20)))
        whole = checksums.words(text) + checksums.words(boiler)
        expected = bytes_checksum(" ".join(whole).encode("utf-8")) if whole else None
        assert words_checksum((text, boiler)) == expected, (text, boiler)


def test_a_documents_features_from_its_pieces_are_those_of_its_whole_text(monkeypatch):
    """A worker computes a long document's features from its first FEATURE_CHARS characters and its
    pieces (Document.body_pieces), never joining the body: they equal those of the joined text,
    whether the pieces are cut between blocks or inside a long block."""
    import random

    from itertools import chain

    from deskdex.converters import Block, Document
    from deskdex.index import features
    from deskdex.index.checksums import words_checksum

    monkeypatch.setattr(features, "FEATURE_CHARS", 500)
    rnd = random.Random(5)
    vocabulary = ["harbour", "Straße", "ship", "😀", "keeper", "ﬁle", "42", "e\u0301t\u00e9"]
    for _ in range(30):
        blocks = [Block.of("p", " ".join(rnd.choice(vocabulary) for _ in range(rnd.randrange(1, 400))))
                  for _ in range(rnd.randrange(1, 12))]
        blocks.append(Block.of("p", "Home | About", boilerplate=True))
        doc = Document(uri="u", blocks=blocks)
        got = features.document_features(doc)
        want = features.features(doc.body_text(), doc.body_text(boilerplate=True))
        assert (got.group, got.fp) == (want.group, want.fp) and (got.fps == want.fps).all()
        assert got.group is not None and list(doc.body_pieces(size=300)) == doc.body_chunks(size=300)
        # the key from small pieces, cut inside blocks too, is the same
        assert words_checksum(chain(doc.body_pieces(size=300), ["Home | About"])) == want.group


def test_near_duplicate_features_read_a_bounded_head(monkeypatch):
    from deskdex.index import features as duplicates

    monkeypatch.setattr(duplicates, "FEATURE_CHARS", 2000)
    head = " ".join(f"word{i} and more of the manual" for i in range(400))[:2000]
    a = duplicates.features(head + " the first edition ends here " * 50)
    b = duplicates.features(head + " a second edition ends otherwise " * 50)
    assert a.fp == b.fp and list(a.fps) == list(b.fps)  # the same head: the same near features
    assert a.group != b.group  # but not the same text: the exact key reads it all


def test_what_is_rolled_back_is_no_candidate_afterwards(conn, monkeypatch):
    """The simhashes searched are kept in memory as well as in the catalog: a rolled-back add
    (the caller's transaction, or a failure inside add itself) must not stay a candidate there."""
    dx = DuplicateIndex(conn)
    text = prose(600, 5)
    fp = dx._features(text, "", None)[1]
    conn.execute("BEGIN")
    dx.add(1, text)
    assert [d for d, _ in dx.tables.search(fp)] == [1]
    conn.execute("ROLLBACK")
    dx.forget()  # what Collection.recover() calls after rolling back
    assert dx.tables.search(fp) == [] and dx.near(text) == []

    def fails(*args, **kwargs):
        raise RuntimeError("cluster tables unwritable")

    monkeypatch.setattr(dx.clusters_, "add", fails)
    with pytest.raises(RuntimeError):
        dx.add(2, text)
    monkeypatch.undo()
    assert dx.tables.search(fp) == [] and dx.near(text) == []
    dx.add(3, text)
    dx.add(4, text + "\nand one more sentence at its end.")
    assert dx.clusters() == [[3, 4]]


def test_a_catalog_with_the_old_permuted_tables_loses_them(conn):
    """Catalogs before the scan kept 35 rows a document in dup_keys: dropped on open, clusters kept."""
    dx = DuplicateIndex(conn)
    a = prose(600, 8)
    dx.add(1, a)
    dx.add(2, a + "\nA closing line.")
    conn.execute("CREATE TABLE dup_keys(t INTEGER, key INTEGER, doc INTEGER, PRIMARY KEY(t, key, doc)) WITHOUT ROWID")
    conn.execute("INSERT INTO dup_meta VALUES('tables', '4/35/7')")
    again = DuplicateIndex(conn)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name='dup_keys'").fetchone() is None
    assert DuplicateIndex.read_only(conn) is not None
    assert again.clusters() == [[1, 2]]
    again.add(3, a)
    assert again.clusters() == [[1, 2, 3]]


def test_an_index_opened_for_a_run_that_adds_nothing_loads_no_numpy(tmp_path):
    """A run over an unchanged folder opens the index for writing and adds nothing: numpy and the
    duplicate features built on it (45 ms, a tenth of such a run) are loaded by the first add only."""
    import subprocess
    import sys

    data = str(tmp_path / "data")
    code = ("import sys\n"
            "from deskdex.converters.document import Block, Document\n"
            "from deskdex.index import Collection, Row\n"
            f"coll = Collection.open({data!r}, writable=True)\n"
            "before = 'numpy' in sys.modules\n"
            "uri = 'file:///notes/' + sys.argv[1]\n"
            "coll.put(Row(uri=uri, path=uri[7:], size=1, mtime=1.0, mime='text/plain'),\n"
            "         Document(uri=uri, mime='text/plain', title='n', blocks=[Block.of('p', sys.argv[2])]))\n"
            "coll.commit(); coll.close()\n"
            "print(before, 'numpy' in sys.modules)")
    for name, seed in (("a.txt", 1), ("b.txt", 2)):
        out = subprocess.run([sys.executable, "-c", code, name, prose(300, seed)], capture_output=True, text=True,
                             check=True).stdout.split()
        assert out == ["False", "True"], out
