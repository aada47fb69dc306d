"""Duplicates end to end: clusters in the catalog and the index, one result per cluster, `deskdex dups`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from .conftest import CLI, make_docx

pytestmark = pytest.mark.slow  # indexes through the CLI

WORDS = ("river harbour engine ledger orchard violin canyon pepper saddle lantern meadow quartz falcon "
         "timber velvet walnut beacon cobalt dolphin ember fjord glacier hazel ivory jasmine kettle "
         "lagoon marble nectar oyster pebble quiver raven sierra tundra umber willow yarrow zephyr").split()


def text(seed: int, n: int = 220) -> str:
    rnd = random.Random(seed)
    sentences = []
    while sum(len(s.split()) for s in sentences) < n:
        sentences.append(" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 14))).capitalize() + ".")
    return " ".join(sentences)


def test_clusters_collapse_and_dups_command(cli: CLI, tmp_path: Path):
    d = tmp_path / "docs"
    d.mkdir()
    body = text(1)
    (d / "report.txt").write_text("Quarterly report\n\n" + body)
    (d / "report-copy.txt").write_text("Quarterly report\n\n" + body)
    (d / "report-2026-11-02.txt").write_text("Quarterly report, revised 2 November 2026\n\n" + body)
    make_docx(d / "report.docx", "Quarterly report", "Ann", "Quarterly report", [body])
    (d / "other.txt").write_text("Another note\n\n" + text(2) + " orchard")
    cli.run("index", str(d))

    # Only the copy is collapsed; the revision and the other format are similar (issue 17).
    res = cli.json("search", "orchard")
    names = sorted(Path(h["path"]).name for h in res["hits"])
    assert names == ["other.txt", "report-2026-11-02.txt", "report.docx", "report.txt"], names
    best = next(h for h in res["hits"] if Path(h["path"]).name == "report.txt")
    assert (best["duplicates"], best["similar"]) == (1, 2)
    every = cli.json("search", "orchard", "--all")
    assert sorted(Path(h["path"]).name for h in every["hits"]) == sorted(
        ["report.txt", "report-copy.txt", "report-2026-11-02.txt", "report.docx", "other.txt"])
    assert cli.json("search", "orchard", "dup:no")["total"] == 1

    clusters = cli.json("dups")["clusters"]
    assert len(clusters) == 1
    members = sorted(Path(x["path"]).name for x in clusters[0]["documents"])
    assert members == ["report-2026-11-02.txt", "report-copy.txt", "report.docx", "report.txt"]
    assert {"id", "documents"} <= set(clusters[0]) and clusters[0]["reclaimable"] > 0
    assert "reclaimable" in cli.run("dups").stdout

    # A file that is not indexed: its near-duplicates, with the share of words in common.
    outside = tmp_path / "draft.txt"
    outside.write_text("Draft\n\n" + body + " One more closing sentence about the harbour.")
    near = json.loads(cli.run("dups", str(outside), "--json").stdout)["duplicates"]
    assert {Path(x["path"]).name for x in near} >= {"report.txt", "report.docx"}
    assert all(0.5 <= x["similarity"] <= 1 for x in near)
    assert "other.txt" not in {Path(x["path"]).name for x in near}

    # A document that changes leaves its cluster; one deleted takes nothing with it.
    (d / "report-copy.txt").write_text("Something else entirely\n\n" + text(3))
    (d / "report.docx").unlink()
    cli.run("index", str(d))
    clusters = cli.json("dups")["clusters"]
    assert [sorted(Path(x["path"]).name for x in c["documents"]) for c in clusters] == [
        ["report-2026-11-02.txt", "report.txt"]]
    hits = {Path(h["path"]).name: h for h in cli.json("search", "orchard")["hits"]}
    assert [(hits[n]["duplicates"], hits[n]["similar"]) for n in ("report.txt", "report-2026-11-02.txt")] == [
        (0, 1), (0, 1)]


def test_short_and_numeric_files_never_cluster_by_similarity(cli: CLI, tmp_path: Path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_text("hello")
    (d / "b.txt").write_text("hello there")
    (d / "n1.txt").write_text(" ".join(str(i) for i in range(300)))
    (d / "n2.txt").write_text(" ".join(str(i) for i in range(1, 301)))
    cli.run("index", str(d))
    assert cli.json("dups")["clusters"] == []
