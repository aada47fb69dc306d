"""Videos in containers mutagen does not read (Matroska, WebM, QuickTime, AVI, FLV), by their metadata
with hachoir: Matroska files made here with mkvmerge (the format's own tool), and the corpus's videos."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.document import Document

from .conftest import CLI, need_corpus

TAGS = """<?xml version="1.0"?>
<Tags><Tag><Targets><TargetTypeValue>50</TargetTypeValue></Targets>
<Simple><Name>ARTIST</Name><String>Quillon Marbeck</String></Simple>
<Simple><Name>GENRE</Name><String>Documentary</String></Simple>
<Simple><Name>DATE_RELEASED</Name><String>2019</String></Simple>
<Simple><Name>COMMENT</Name><String>filmed on the yarrowby coast</String></Simple>
</Tag></Tags>
"""


def mkvmerge() -> str:
    tool = shutil.which("mkvmerge")
    if tool is None:
        pytest.skip("mkvmerge not installed (Debian mkvtoolnix; packaging/system-deps.sh installs it)")
    return tool


def make_mkv(folder: Path, name: str = "harbour.mkv", title: str = "Harbour Lights at Dusk") -> Path:
    """A Matroska file of one subtitle track a minute long, with a title and global tags."""
    srt, tags, out = folder / "s.srt", folder / "tags.xml", folder / name
    srt.write_text("1\n00:00:01,000 --> 00:00:04,000\nfirst line\n\n2\n00:01:00,000 --> 00:01:05,000\nend\n")
    tags.write_text(TAGS)
    subprocess.run([mkvmerge(), "-q", "-o", str(out), "--title", title, "--global-tags", str(tags), str(srt)],
                   check=True)
    srt.unlink()
    tags.unlink()
    return out


def one(path: Path) -> Document:
    outcomes = convert(Source.from_path(path))
    assert len(outcomes) == 1 and outcomes[0].ok, outcomes[0].message
    assert outcomes[0].document is not None
    return outcomes[0].document


def test_matroska_title_tags_and_duration(tmp_path: Path) -> None:
    doc = one(make_mkv(tmp_path))
    assert doc.mime == "video/x-matroska"
    assert doc.title == "Harbour Lights at Dusk"
    assert doc.meta["author"] == "Quillon Marbeck" and doc.meta["genre"] == "Documentary"
    assert doc.meta["date"] == "2019" and doc.meta["duration"] == "64"
    assert "filmed on the yarrowby coast" in doc.text() and "Duration: 1:04" in doc.text()


@pytest.mark.parametrize("name", ["clip.mkv", "clip.webm", "clip.mov", "clip.avi", "clip.flv"])
def test_truncated_or_garbage_is_corrupt(tmp_path: Path, name: str) -> None:
    bad = tmp_path / name
    bad.write_bytes(b"\x1aE\xdf\xa3" + os.urandom(3000) if name.endswith(("mkv", "webm")) else os.urandom(3000))
    outcome = convert(Source.from_path(bad))[0]
    assert outcome.reason == "corrupt", (outcome.reason, outcome.message)
    assert "video" in outcome.message


def test_truncated_matroska_keeps_what_was_read_or_is_corrupt(tmp_path: Path) -> None:
    whole = make_mkv(tmp_path).read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(whole[: len(whole) // 3])
    outcome = convert(Source.from_path(cut))[0]
    # Cut before the tags: either a document without them, or corrupt; never a converter bug.
    assert outcome.ok or outcome.reason == "corrupt", (outcome.reason, outcome.message)


def test_corpus_videos() -> None:
    corpus = need_corpus()
    videos = [p for p in (corpus / "deb/golang-mimetype-testdata").glob("*")
              if p.suffix in (".mkv", ".webm", ".mov", ".flv")]
    if not videos:
        pytest.skip("the corpus holds none of its usual videos")
    for p in videos:
        doc = one(p)
        assert doc.meta.get("duration"), (p, doc.meta)


@pytest.mark.slow
def test_index_and_search_a_video_by_its_tags(cli: CLI, tmp_path: Path) -> None:
    tree = tmp_path / "videos"
    tree.mkdir()
    make_mkv(tree)
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["indexed"] == 1 and summary["failed"] == 0, summary
    hits = cli.json("search", "yarrowby")["hits"]
    assert [os.path.basename(h["path"]) for h in hits] == ["harbour.mkv"]
    assert hits[0]["title"] == "Harbour Lights at Dusk"
    assert [os.path.basename(h["path"]) for h in cli.json("search", "type:video", "marbeck")["hits"]] == ["harbour.mkv"]


@pytest.mark.slow
def test_a_film_over_the_size_limit_is_indexed_by_its_tags_without_being_read(cli: CLI, tmp_path: Path) -> None:
    """max_file_mb keeps documents out; a film, read by its headers only, is indexed whatever its size
    (its bytes sampled, not read whole), and a move of it is recognised by that sample."""
    (cli.home / "config").mkdir()
    (cli.home / "config" / "config.toml").write_text("max_file_mb = 1\n")
    tree = tmp_path / "videos"
    tree.mkdir()
    film = make_mkv(tree, "film.mkv")
    with open(film, "r+b") as f:  # 4 GiB, sparse: a film's size without its disk space
        f.truncate(4 * 2**30)
    (tree / "big.txt").write_text("word " * 300_000)  # 1.5 MB of text: over the limit, refused
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["indexed"] == 1 and summary["failed"] == 1, summary
    failures = cli.json("status", "--failures")["failures"]
    assert [(os.path.basename(f["path"]), f["reason"]) for f in failures] == [("big.txt", "too_large")], failures
    hits = cli.json("search", "yarrowby")["hits"]
    assert [(os.path.basename(h["path"]), h["size"]) for h in hits] == [("film.mkv", 4 * 2**30)]

    film.rename(tree / "moved.mkv")
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["reused"] == 1 and summary["indexed"] == 0, summary
    assert [os.path.basename(h["path"]) for h in cli.json("search", "marbeck")["hits"]] == ["moved.mkv"]
