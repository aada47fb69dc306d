"""Which documents a search collapses into one hit (issue 17): copies only (the same text in the
same format, or near-copies of one format and language); other formats, edits, versions and
translations are hits of their own that say how many similar documents there are, and
``--similar URI`` lists them. Real files, a real index."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import CLI, make_docx, worded, worded_lines
from .test_dups_cli import text
from .test_dups_kinds import edited
from .test_tray import qapp, wait_for, xvfb  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # Xvfb and Qt, indexes built per test


@pytest.fixture
def docs(cli: CLI, tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "notes.txt").write_text("Harbour notes\n\n" + text(11))
    shutil.copy(d / "notes.txt", d / "Copy of notes.txt")
    body = text(13)
    (d / "plan.txt").write_text("Orchard plan\n\n" + body)
    make_docx(d / "plan.docx", "Orchard plan", "Ann", "Orchard plan", [body])
    words = text(12, 400).split()
    (d / "ledger.txt").write_text("Ledger\n\n" + " ".join(words))
    (d / "ledger-edited.txt").write_text("Ledger\n\n" + edited(words, 0.2, 29))
    # A page left untranslated: the same text in two languages' folders.
    page = "Install guide\n\n" + text(14)
    for lang in ("de-DE", "fr-FR"):
        (d / "handbook" / lang).mkdir(parents=True)
        (d / "handbook" / lang / "install.txt").write_text(page)
    # The copy, newer and named like one, has the searched word in its name: it matches better.
    (d / "budget.txt").write_text("Budget\n\n" + text(15))
    shutil.copy(d / "budget.txt", d / "budget zucchini copy.txt")
    os.utime(d / "budget.txt", (1_600_000_000, 1_600_000_000))
    cli.run("index", str(d))
    return d


def hits_named(cli: CLI, *args: str) -> dict[str, dict]:
    res = cli.json("search", *args, "--limit", "50")
    return {"/".join(Path(h["path"]).parts[-2:]) if "handbook" in h["path"] else Path(h["path"]).name: h
            for h in worded(res)}


def test_an_exact_copy_is_collapsed(docs: Path, cli: CLI):
    found = hits_named(cli, "harbour", "notes")
    assert list(found) == ["notes.txt"], found
    assert (found["notes.txt"]["duplicates"], found["notes.txt"]["similar"]) == (1, 0)


def test_the_same_text_in_another_format_is_not_hidden(docs: Path, cli: CLI):
    found = hits_named(cli, "orchard", "plan")
    assert sorted(found) == ["plan.docx", "plan.txt"], found
    assert [(h["duplicates"], h["similar"]) for h in found.values()] == [(0, 1), (0, 1)]


def test_a_near_duplicate_edit_is_not_hidden(docs: Path, cli: CLI):
    found = hits_named(cli, "ledger")
    assert {"ledger.txt", "ledger-edited.txt"} <= set(found), found
    assert found["ledger-edited.txt"]["similar"] == 1 and found["ledger-edited.txt"]["duplicates"] == 0


def test_a_translation_is_not_hidden(docs: Path, cli: CLI):
    found = hits_named(cli, "install", "guide")
    assert sorted(found) == ["de-DE/install.txt", "fr-FR/install.txt"], found
    assert all((h["duplicates"], h["similar"]) == (0, 1) for h in found.values())


def test_a_copy_that_matches_better_is_the_one_shown(docs: Path, cli: CLI):
    word = text(15).split()[0].lower()
    found = hits_named(cli, word, "OR", "zucchini")
    assert "budget zucchini copy.txt" in found and "budget.txt" not in found, found
    assert found["budget zucchini copy.txt"]["duplicates"] == 1
    # Without the name's word the two match equally: the original stands for both.
    found = hits_named(cli, "budget")
    assert "budget.txt" in found and "budget zucchini copy.txt" not in found, found


def test_the_text_output_says_how_many_are_similar(docs: Path, cli: CLI):
    lines = worded_lines(cli.run("search", "orchard", "plan").stdout)
    assert sum(line.endswith("  1 similar") for line in lines) == 2, lines
    lines = worded_lines(cli.run("search", "harbour", "notes").stdout)
    assert lines[1].endswith("  1 duplicate"), lines


def test_expanding_lists_the_similar_and_the_copies(docs: Path, cli: CLI):
    plan = hits_named(cli, "orchard", "plan")["plan.txt"]
    listed = cli.json("search", "--similar", plan["uri"])
    assert sorted(Path(h["path"]).name for h in listed["hits"]) == ["plan.docx", "plan.txt"], listed
    # With words, ranked by them; copies are listed too (nothing collapsed).
    notes = hits_named(cli, "harbour", "notes")["notes.txt"]
    listed = cli.json("search", "harbour", "--similar", notes["uri"])
    assert sorted(Path(h["path"]).name for h in listed["hits"]) == ["Copy of notes.txt", "notes.txt"], listed
    ledger = hits_named(cli, "ledger")["ledger.txt"]
    listed = cli.json("search", "--similar", ledger["uri"])
    assert sorted(Path(h["path"]).name for h in listed["hits"]) == ["ledger-edited.txt", "ledger.txt"], listed
    assert cli.run("search", check=False).returncode != 0  # neither words nor --similar


def test_the_tray_lists_the_similar_from_the_context_menu(qapp: Any, docs: Path, home: Path):
    """"Show N similar" on a hit lists its cluster as results, ranked by the words typed; here read
    from the index (no daemon), as the window does when none answers."""
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.app import TrayApp
    from deskdex.clients.tray.search_window import PATH_ROLE
    from deskdex.paths import Home

    t = TrayApp(str(home / "none.sock"), poll_ms=3_600_000, data_dir=Home.resolve(str(home)).data_dir)
    t.start()
    try:
        w = t.search_window
        t.search_action.trigger()

        def shown() -> list[str]:
            return sorted(Path(w.results.topLevelItem(i).data(0, PATH_ROLE)).name
                          for i in range(w.results.topLevelItemCount()))

        QTest.keyClicks(w.box, "edited ")  # in one file's name only
        wait_for(lambda: shown() == ["ledger-edited.txt"], "the edited ledger")
        item = w.results.topLevelItem(0)
        assert item.text(0).endswith("1 similar"), item.text(0)
        menu = w.context_menu(item)
        assert menu is not None
        actions = {a.text(): a for a in menu.actions()}
        assert list(actions)[-1] == "Show 1 similar", list(actions)
        actions["Show 1 similar"].trigger()
        wait_for(lambda: shown() == ["ledger-edited.txt", "ledger.txt"], "the ledger and its edit")
        assert Path(w.results.topLevelItem(0).data(0, PATH_ROLE)).name == "ledger-edited.txt"  # ranked by the words
    finally:
        t.close()


def test_a_near_copy_is_collapsed(cli: CLI, tmp_path: Path):
    """One word changed in three thousand: 99 % of the fingerprints in common, a copy."""
    d = tmp_path / "docs"
    d.mkdir()
    words = ("Logbook\n\n" + text(16, 3000)).split()
    (d / "logbook.txt").write_text(" ".join(words))
    words[len(words) // 2] = "zanzibar"
    (d / "logbook-saved-again.txt").write_text(" ".join(words))
    cli.run("index", str(d))
    found = hits_named(cli, "logbook")
    assert list(found) == ["logbook.txt"] and (found["logbook.txt"]["duplicates"], found["logbook.txt"]["similar"]) == (
        1, 0), found
    assert list(hits_named(cli, "zanzibar")) == ["logbook-saved-again.txt"]  # the one that matches


def test_a_reader_counts_copies_and_similar_among_what_they_may_read(tmp_path: Path):
    """Enterprise mode: a reader's copies and similar documents are among the documents that
    reader may read; another user's copy neither counts nor collapses anything."""
    import json

    from deskdex.converters import Block, Document
    from deskdex.index import Collection, Row, search

    alice, bob = 1001, 1002
    body = "Field guide " + text(21)
    docs = [("/home/alice/guide.txt", "text/plain", alice), ("/home/alice/guide-copy.txt", "text/plain", alice),
            ("/home/alice/guide.html", "text/html", alice), ("/home/bob/guide.txt", "text/plain", bob),
            ("/home/bob/guide.html", "text/html", bob)]
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        for i, (path, mime, uid) in enumerate(docs):
            uri = "file://" + path
            doc = Document(uri=uri, mime=mime, title="Field guide", blocks=[Block.of("p", body)])
            coll.put(Row(uri=uri, path=path, size=len(body), mtime=1_600_000_000 + i, mime=mime,
                         readers=json.dumps({"uids": [uid], "everyone": False})), doc)
        coll.commit()
    with Collection.open(str(tmp_path / "data")) as coll:
        mine = {h["path"]: (h["duplicates"], h["similar"]) for h in search(coll, "walnut", reader=alice)["hits"]}
        theirs = {h["path"]: (h["duplicates"], h["similar"]) for h in search(coll, "walnut", reader=bob)["hits"]}
        root = {h["path"]: (h["duplicates"], h["similar"]) for h in search(coll, "walnut")["hits"]}
        # Expanding lists the reader's own documents of the cluster; another's lists nothing.
        listed = search(coll, "", reader=alice, similar="file:///home/alice/guide.html")
        nothing = search(coll, "walnut", reader=alice, similar="file:///home/bob/guide.txt")
    assert mine == {"/home/alice/guide.txt": (1, 1), "/home/alice/guide.html": (0, 2)}, mine
    assert theirs == {"/home/bob/guide.txt": (0, 1), "/home/bob/guide.html": (0, 1)}, theirs
    assert root == {"/home/alice/guide.txt": (2, 2), "/home/alice/guide.html": (1, 3)}, root
    assert sorted(h["path"] for h in listed["hits"]) == ["/home/alice/guide-copy.txt", "/home/alice/guide.html",
                                                         "/home/alice/guide.txt"], listed
    assert (nothing["total"], nothing["hits"]) == (0, []), nothing
