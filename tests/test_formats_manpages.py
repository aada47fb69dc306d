"""Compressed single files are one document each (issue 16); man pages become tagged text."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from deskdex.converters import Source, convert

from .conftest import CLI, make_pdf


def hits(cli: CLI, *words: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cli.json("search", *words)["hits"]
    return found


def test_compressed_single_files_are_one_document_each(cli: CLI, tmp_path: Path) -> None:
    t = tmp_path / "docs"
    t.mkdir()
    (t / "notes.txt.gz").write_bytes(gzip.compress(b"Notes\n\nthe gannet colony nests on the cliff\n"))
    (t / "log.txt.bz2").write_bytes(bz2.compress(b"Log\n\nthe puffin burrows were counted\n"))
    (t / "memo.txt.xz").write_bytes(lzma.compress(b"Memo\n\nthe cormorant dried its wings\n"))
    pdf = make_pdf(tmp_path / "survey.pdf", "Seabird survey", "Ann Author", ["Kittiwake numbers fell this year."])
    (t / "survey.pdf.gz").write_bytes(gzip.compress(pdf.read_bytes()))
    summary = cli.json("index", str(t))
    assert summary["indexed"] == 4 and summary["failed"] == 0 and summary.get("members", 0) == 0, summary
    for word, name, title in [("gannet", "notes.txt.gz", "Notes"), ("puffin", "log.txt.bz2", "Log"),
                              ("cormorant", "memo.txt.xz", "Memo"), ("kittiwake", "survey.pdf.gz", "Seabird survey")]:
        found = hits(cli, word)
        assert len(found) == 1, found
        hit, path = found[0], t / name
        assert hit["uri"] == path.as_uri() and hit["path"] == str(path)
        assert hit["size"] == path.stat().st_size and hit["title"] == title
        assert word in hit["snippet"].lower()
    assert hits(cli, "survey")[0]["mime"] == "application/pdf"
    # Listed once, by name too: no "notes.txt.gz#notes.txt" beside it.
    assert [h["uri"] for h in hits(cli, "notes")] == [(t / "notes.txt.gz").as_uri()]


@pytest.mark.parametrize("suffix,compress", [("gz", gzip.compress), ("bz2", bz2.compress), ("xz", lzma.compress)])
def test_a_compression_bomb_still_fails_on_the_limit(tmp_path: Path, suffix: str,
                                                     compress: Callable[[bytes], bytes]) -> None:
    p = tmp_path / f"server.log.{suffix}"
    p.write_bytes(compress(bytes(8 * 2**20)))  # 8 MiB of zeros in a few KiB
    outcomes = convert(Source.from_path(p))
    assert [o.uri for o in outcomes] == [Source.from_path(p).uri]
    assert outcomes[0].reason == "hostile" and "bomb" in outcomes[0].message


def test_a_corrupt_compressed_file_is_that_files_failure(tmp_path: Path) -> None:
    p = tmp_path / "broken.txt.gz"
    p.write_bytes(gzip.compress(b"some words " * 100)[:40])
    outcomes = convert(Source.from_path(p))
    assert [(o.uri, o.reason) for o in outcomes] == [(Source.from_path(p).uri, "corrupt")]


def test_a_compressed_tar_stays_a_container(tmp_path: Path) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("inside.txt")
        info.size = 12
        tf.addfile(info, io.BytesIO(b"inside words"))
    p = tmp_path / "backup.tar.gz"
    p.write_bytes(buf.getvalue())
    uris = [o.uri for o in convert(Source.from_path(p))]
    assert uris == [Source.from_path(p).uri, Source.from_path(p).uri + "#inside.txt"]
    # A tar compressed under a name that does not say so is a container all the same.
    q = tmp_path / "backup.gz"
    q.write_bytes(buf.getvalue())
    assert [o.uri for o in convert(Source.from_path(q))] == [Source.from_path(q).uri,
                                                             Source.from_path(q).uri + "#inside.txt"]
