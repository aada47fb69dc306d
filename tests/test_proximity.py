"""Ranking for known items (issue 32): query words close together in a body, and a query word in
a file name, lift a document. Each test also runs with its feature off and sees the order flip,
so that it can fail: the documents are built so that, without the feature, the other one wins."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest


from deskdex.index import Collection, fulltext, query, search

from .conftest import DESKDEX, text_collection
from .daemon_fixture import DaemonProcess

NOW = time.time()
FILLER = "The committee met again on Tuesday and read the minutes of the last meeting aloud. "


def _docs() -> list[tuple[str, str, str]]:
    docs = [(f"/home/u/misc/note{i}.txt", f"Note {i}", FILLER * 3 + f"Item {i} was about the budget.")
            for i in range(30)]
    docs += [
        # "harbour lighthouse" side by side, in a body a little longer than the next one's: BM25
        # alone ranks the shorter first.
        ("/home/u/trips/day1.txt", "Day one",
         FILLER * 6 + "We walked to the harbour lighthouse at dusk. " + FILLER * 6 + "It was cold."),
        # The same two words, as often, pages apart.
        ("/home/u/trips/day2.txt", "Day two",
         "The harbour was busy. " + FILLER * 8 + "Someone mentioned a lighthouse."),
        # The same body but one word, which is in the file name of the other: bodies alone rank
        # the one with the word twice first.
        ("/home/u/letters/pelican.txt", "Letter",
         FILLER * 2 + "About the pelican: the bird was seen near the pier. " + FILLER),
        ("/home/u/letters/letter7.txt", "Letter",
         FILLER * 2 + "About the pelican: the pelican was seen near the pier. " + FILLER),
    ]
    return docs


@pytest.fixture(scope="module")
def coll(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collection]:
    c = text_collection(tmp_path_factory.mktemp("proximity"), _docs(), NOW)
    yield c
    c.close()


def first(coll: Collection, q: str) -> str:
    return Path(search(coll, q, limit=5, snippets=False)["hits"][0]["path"]).name


def test_words_close_together_outrank_the_same_words_far_apart(coll: Collection,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert first(coll, "lighthouse harbour") == "day1.txt"
    assert first(coll, "harbour lighthouse") == "day1.txt"
    monkeypatch.setattr(query, "PROXIMITY", 0.0)
    assert first(coll, "harbour lighthouse") == "day2.txt"  # what the test guards against


def test_a_query_word_in_the_file_name_lifts_a_document(coll: Collection, monkeypatch: pytest.MonkeyPatch) -> None:
    assert first(coll, "pelican pier") == "pelican.txt"
    monkeypatch.setitem(fulltext.FIELD_BOOSTS, "name", 0.0)
    monkeypatch.setitem(fulltext.FIELD_BOOSTS, "path", 0.0)
    assert first(coll, "pelican pier") == "letter7.txt"


def test_the_installed_command_ranks_so_through_the_daemon(tmp_path: Path) -> None:
    """The same documents as files, found by `deskdex search` (the console script) through a
    running daemon: what a user sees. The in-process tests above show each order flips without
    its feature."""
    for path, title, body in _docs():
        f = tmp_path / "docs" / Path(path).relative_to("/home/u")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"{title}\n\n{body}\n")
    daemon = DaemonProcess(tmp_path / "home", [tmp_path / "docs"]).start()
    try:
        def first_path(q: str) -> str:
            out = subprocess.run([DESKDEX, "--home", str(daemon.home), "search", "--paths", q], capture_output=True,
                                 text=True, timeout=60, check=True).stdout
            return Path(out.splitlines()[0]).name

        assert first_path("harbour lighthouse") == "day1.txt"
        assert first_path("pelican pier") == "pelican.txt"
    finally:
        daemon.stop()
