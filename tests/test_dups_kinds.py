"""What `deskdex dups` calls identical (the same bytes only), what it says of the rest, and which
member of a cluster a search shows (issue 17, duplicates): real files, a real index."""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from deskdex.clients.render import human

from .conftest import CLI, make_docx, worded_lines
from .test_dups_cli import text

pytestmark = pytest.mark.slow  # an index built through the CLI per test


def edited(words: list[str], share: float, seed: int) -> str:
    """The last ``share`` of ``words`` replaced by others."""
    n = int(len(words) * share)
    return " ".join(words[:len(words) - n]) + " " + text(seed, n)


@pytest.fixture
def kinds(cli: CLI, tmp_path: Path) -> tuple[Path, dict]:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "notes.txt").write_text("Harbour notes\n\n" + text(11))
    shutil.copy(d / "notes.txt", d / "Copy of notes.txt")
    words = text(12, 400).split()
    (d / "ledger.txt").write_text("Ledger\n\n" + " ".join(words))
    # A fifth of the text rewritten: about two thirds of the fingerprints in common, a near-duplicate.
    (d / "ledger-edited.txt").write_text("Ledger\n\n" + edited(words, 0.2, 29))
    body = text(13)
    (d / "plan.txt").write_text("Orchard plan\n\n" + body)
    make_docx(d / "plan.docx", "Orchard plan", "Ann", "Orchard plan", [body])
    cli.run("index", str(d))
    return d, cli.json("dups")


def by_name(cluster: dict) -> dict[str, dict]:
    return {Path(x["path"]).name: x for x in cluster["documents"]}


def cluster_of(found: dict, name: str) -> dict:
    return next(c for c in found["clusters"] if name in by_name(c))


def test_identical_bytes_are_copies_and_only_they_are_reclaimable(kinds: tuple[Path, dict]):
    d, found = kinds
    c = cluster_of(found, "notes.txt")
    docs = by_name(c)
    assert [Path(x["path"]).name for x in c["documents"]] == ["notes.txt", "Copy of notes.txt"]
    assert docs["notes.txt"]["relation"] == "original"
    assert docs["Copy of notes.txt"]["relation"] == "identical"
    assert docs["Copy of notes.txt"]["identical_to"] == docs["notes.txt"]["uri"]
    size = (d / "notes.txt").stat().st_size
    assert c["reclaimable"] == size
    assert found["reclaimable"] == size  # nothing from the edit or the other format


def test_a_near_duplicate_edit_is_similar_not_a_copy(kinds: tuple[Path, dict]):
    _, found = kinds
    c = cluster_of(found, "ledger.txt")
    edit = by_name(c)["ledger-edited.txt"]
    assert edit["relation"] == "similar" and 0.5 <= edit["similarity"] < 0.8, edit
    assert c["reclaimable"] == 0


def test_the_same_text_in_another_format_is_not_a_copy(kinds: tuple[Path, dict]):
    _, found = kinds
    c = cluster_of(found, "plan.txt")
    docs = by_name(c)
    assert docs["plan.txt"]["relation"] == "original"  # the older of the two: written first
    assert docs["plan.docx"]["relation"] == "other_format" and docs["plan.docx"]["similarity"] == 1.0
    assert c["reclaimable"] == 0


def test_dups_text_says_identical_for_identical_bytes_only(kinds: tuple[Path, dict], cli: CLI):
    d, _ = kinds
    size = (d / "notes.txt").stat().st_size
    lines = cli.run("dups").stdout.splitlines()
    at = lines.index(f"  {d / 'notes.txt'}  {human(size)}  original")
    assert lines[at - 1] == f"2 identical copies, {human(size)} reclaimable:"
    assert lines[at + 1] == f"  {d / 'Copy of notes.txt'}  {human(size)}  identical"
    edit = next(line for line in lines if "ledger-edited.txt" in line)
    assert edit.endswith(" %)") and "similar (6" in edit, edit
    assert next(line for line in lines if "plan.docx" in line).endswith("  same text, other format")
    headings = [line for line in lines[:-1] if not line.startswith("  ")]
    assert sorted(headings)[:2] == ["2 documents, none identical, nothing reclaimable:"] * 2, lines
    assert lines[-1] == f"3 clusters, {human(size)} reclaimable in all (identical copies only)"


def test_search_text_shows_the_duplicate_count(kinds: tuple[Path, dict], cli: CLI):
    out = cli.run("search", "harbour", "notes").stdout
    first = out.splitlines()[:2]
    assert first[0].endswith("Harbour notes") and first[1].endswith("  1 duplicate"), out
    # The copy is folded into its hit and said apart, not counted as a result not listed; the
    # documents related by meaning alone come after, counted apart.
    assert re.fullmatch(r"1 result \(\+1 copy\)(; \d+ related by meaning)?", out.splitlines()[-1]), out
    every = worded_lines(cli.run("search", "harbour", "notes", "--all").stdout)
    assert sum(line.endswith("  1 duplicate") for line in every) == 2, every
    assert not any(line.endswith("duplicate") for line in cli.run("search", "ledger").stdout.splitlines()[:1])


@pytest.fixture
def guide(cli: CLI, tmp_path: Path) -> Path:
    """The same text three times: a copy (the oldest file), the original, an archive member (the newest)."""
    d = tmp_path / "docs"
    d.mkdir()
    content = "Field guide\n\n" + text(21)
    (d / "Copy of guide.txt").write_text(content)
    with zipfile.ZipFile(d / "bundle.zip", "w") as z:
        z.writestr("guide.txt", content)
    (d / "guide.txt").write_text(content)
    os.utime(d / "Copy of guide.txt", (1_600_000_000, 1_600_000_000))
    os.utime(d / "guide.txt", (1_650_000_000, 1_650_000_000))
    os.utime(d / "bundle.zip", (1_700_000_000, 1_700_000_000))
    cli.run("index", str(d))
    return d


def test_a_cluster_is_shown_by_its_original(guide: Path, cli: CLI):
    res = cli.json("search", "walnut")
    hits = [h for h in res["hits"] if "guide" in h["uri"]]
    assert [h["path"] for h in hits] == [str(guide / "guide.txt")], res["hits"]
    assert hits[0]["duplicates"] == 2
    found = cli.json("dups")["clusters"]
    assert [Path(x["uri"].split("#")[-1]).name if "#" in x["uri"] else Path(x["path"]).name
            for x in found[0]["documents"]][0] == "guide.txt"


def test_a_readers_cluster_is_shown_by_its_original_among_what_they_may_read(tmp_path: Path):
    """An enterprise daemon's reader: the original among the documents that reader may read,
    whatever others hold (issue 15); rows stamped with readers as the enterprise indexer does."""
    from deskdex.converters import Block, Document
    from deskdex.index import Collection, Row, search

    alice, bob = 1001, 1002
    body = "Field guide " + text(21)
    docs = [("/home/bob/guide.txt", bob, 1_500_000_000),  # the oldest, and not Alice's
            ("/home/alice/Copy of guide.txt", alice, 1_750_000_000),  # the newest
            ("/home/alice/bundle.zip#guide.txt", alice, 1_720_000_000),
            ("/home/alice/guide.txt", alice, 1_600_000_000),
            ("/home/alice/guide (1).txt", alice, 1_550_000_000)]  # Alice's oldest
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        for path, uid, mtime in docs:
            uri = "file://" + path.replace(" ", "%20")
            doc = Document(uri=uri, mime="text/plain", title="Field guide", blocks=[Block.of("p", body)])
            coll.put(Row(uri=uri, path=path.split("#")[0], size=len(body), mtime=mtime,
                         readers=json.dumps({"uids": [uid], "everyone": False})), doc)
        coll.commit()
    with Collection.open(str(tmp_path / "data")) as coll:
        mine = search(coll, "walnut", reader=alice)["hits"]
        root = search(coll, "walnut")["hits"]
    assert [(h["path"], h["duplicates"]) for h in mine] == [("/home/alice/guide.txt", 3)], mine
    assert [(h["path"], h["duplicates"]) for h in root] == [("/home/bob/guide.txt", 4)], root
