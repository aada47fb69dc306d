"""Compressed single files are one document each (issue 16); man pages become tagged text."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path
from typing import Any, Callable

import pytest

from deskdex.converters import Source, convert

from .conftest import CLI, make_pdf


def hits(cli: CLI, *words: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cli.json("search", *words)["hits"]
    return found


@pytest.mark.slow
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


# --- man pages ----------------------------------------------------------------------------------

PAGE = r""".\" A page written for this test: comments, strings and layout requests must all vanish.
.de XX
.ft B
..
.ds Vw 4.2
.TH HARBOURCTL 1 "2026-12-01" "harbour \*(Vw" "User Commands"
.SH NAME
harbourctl \- steer the \fBharbour\fP pilot boats
.SH SYNOPSIS
.B harbourctl
[\fB\-v\fR]
.I berth
.SH DESCRIPTION
.B harbourctl
moves a \fIpilot boat\fR to its \(lqberth\(rq \(em with the tide\e.
.if n \{\
.ds secret not shown
.\}
.PP
Text after a \-\-double dash and a non\-breaking\ space, size \s-1small\s0.
.SS Options
.TP
.BR \-v ", " \-\-verbose
Say what the boat does.
.IP \(bu 4
a bullet point about lighthouses
.RS
.nf
  preformatted   spacing kept
.fi
.RE
.SH "SEE ALSO"
.BR tide (5),
.UR https://example.org/harbour
the harbour site
.UE .
"""


def test_a_man_page_is_tagged_text(tmp_path: Path) -> None:
    p = tmp_path / "harbourctl.1"
    p.write_text(PAGE)
    [out] = convert(Source.from_path(p))
    doc = out.document
    assert doc is not None and doc.mime == "text/troff"
    assert doc.title == "harbourctl(1)" and doc.meta["description"] == "steer the harbour pilot boats"
    assert doc.meta["man_section"] == "1"
    assert [(h.level, h.text) for h in doc.headings()] == [
        (1, "NAME"), (1, "SYNOPSIS"), (1, "DESCRIPTION"), (2, "Options"), (1, "SEE ALSO")]
    text = doc.text()
    assert "harbourctl [-v] berth" in text
    assert "moves a pilot boat to its \u201cberth\u201d \u2014 with the tide\\." in text
    assert "Text after a --double dash and a non-breaking space, size small." in text
    assert "-v, --verbose" in text and "Say what the boat does." in text
    assert "a bullet point about lighthouses" in text and "  preformatted   spacing kept" in text
    assert "tide(5)," in text and "the harbour site" in text
    for roff in ("\\f", "\\-", "\\(", "\\e", "\\s", ".TP", ".B ", ".nf", ".RS", ".de", ".ds", "secret", 'A page written'):
        assert roff not in text, roff
    runs = [(r.style, r.text) for b in doc.blocks for r in b.runs]
    assert ("strong", "harbourctl") in runs and ("em", "pilot boat") in runs and ("em", "berth") in runs
    assert any(r.href == "https://example.org/harbour" for r in doc.links())
    assert any(b.kind == "pre" for b in doc.blocks) and any(b.kind == "li" for b in doc.blocks)


def test_an_mdoc_page(tmp_path: Path) -> None:
    p = tmp_path / "moor.8"
    p.write_text(".Dd December 1, 2026\n.Dt MOOR 8\n.Os\n.Sh NAME\n.Nm moor\n.Nd tie a boat to the quay\n"
                 ".Sh SYNOPSIS\n.Nm\n.Op Fl f\n.Ar rope\n.Sh DESCRIPTION\nThe\n.Nm\nutility ties a boat.\n"
                 ".Bl -tag -width Ds\n.It Fl f\nForce the knot.\n.El\n.Ss Knots\nSee\n.Xr knot 7 .\n")
    [out] = convert(Source.from_path(p))
    doc = out.document
    assert doc is not None and doc.title == "moor(8)" and doc.meta["description"] == "tie a boat to the quay"
    assert [(h.level, h.text) for h in doc.headings()] == [(1, "NAME"), (1, "SYNOPSIS"), (1, "DESCRIPTION"),
                                                           (2, "Knots")]
    text = doc.text()
    assert "moor [-f] rope" in text and "The moor utility ties a boat." in text
    assert "-f Force the knot." in text and "knot(7)" in text
    assert not [line for line in text.splitlines() if line.startswith(".") or "\\" in line]


@pytest.mark.slow
def test_a_gzipped_man_page_through_the_cli(cli: CLI, tmp_path: Path) -> None:
    t = tmp_path / "man" / "man1"
    t.mkdir(parents=True)
    (t / "harbourctl.1.gz").write_bytes(gzip.compress(PAGE.encode()))
    summary = cli.json("index", str(tmp_path / "man"))
    assert summary["indexed"] == 1 and summary["failed"] == 0
    [hit] = hits(cli, "lighthouses")
    assert hit["uri"] == (t / "harbourctl.1.gz").as_uri() and hit["title"] == "harbourctl(1)"
    assert hit["size"] == (t / "harbourctl.1.gz").stat().st_size and hit["mime"] == "text/troff"
    shown = cli.run("show", str(t / "harbourctl.1.gz")).stdout
    assert '<h level="1">DESCRIPTION</h>' in shown and "\\f" not in shown


def test_a_real_man_page_from_the_system() -> None:
    pages = [p for p in (Path("/usr/share/man/man1") / n for n in ("ls.1.gz", "gzip.1.gz", "tar.1.gz", "cp.1.gz"))
             if p.is_file()]
    if not pages:
        pytest.skip("no gzip'd man page in /usr/share/man/man1 (man-db pages not installed)")
    page = pages[0]
    [out] = convert(Source.from_path(page))
    doc = out.document
    assert doc is not None and doc.mime == "text/troff" and doc.meta["compression"] == "application/gzip"
    name = page.name.split(".")[0]
    assert doc.title == f"{name}(1)" and doc.meta["description"]
    headings = [h.text for h in doc.headings()]
    assert headings[:2] == ["NAME", "SYNOPSIS"] and "DESCRIPTION" in headings
    text = doc.text()
    assert not [line for line in text.splitlines() if line.startswith(".")]
    assert "\\f" not in text and "\\-" not in text


@pytest.mark.parametrize("content", [b"notes for the first meeting\n\nbring the charts\n",
                                     b"...and then the charts\n", b"'Twas a calm night\n"])
def test_a_numbered_file_that_is_not_roff_stays_text(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "notes.1"
    p.write_bytes(content)
    [out] = convert(Source.from_path(p))
    assert out.document is not None and out.document.mime == "text/plain"
    assert content.decode().split("\n")[0] in out.document.text()
    # A binary file with such a suffix is found by its name, as before.
    q = tmp_path / "backup.2"
    q.write_bytes(bytes(range(256)) * 4)
    [bin_out] = convert(Source.from_path(q))
    assert bin_out.document is not None and bin_out.document.meta.get("content") == "none"


def test_other_section_suffixes_so_pages_and_string_bombs(tmp_path: Path) -> None:
    p = tmp_path / "EXIT_FAILURE.3const"
    p.write_text(".TH EXIT_FAILURE 3const\n.SH NAME\nEXIT_FAILURE \\- unsuccessful exit status\n")
    [out] = convert(Source.from_path(p))
    assert out.document is not None and out.document.title == "EXIT_FAILURE(3const)"
    # A page that only points at another says which.
    q = tmp_path / "init.1"
    q.write_text(".so man1/systemd.1\n")
    [out] = convert(Source.from_path(q))
    assert out.document is not None and out.document.title == "init" and "systemd(1)" in out.document.text()
    # Strings of strings of strings: expanded within a bound, quickly.
    r = tmp_path / "laughs.1"
    lines = [".ds a0 ha"] + [f".ds a{i} " + f"\\*[a{i - 1}]" * 10 for i in range(1, 9)]
    r.write_text("\n".join(lines) + "\n.TH LAUGHS 1\n.SH NAME\nlaughs \\- \\*[a8]\n")
    [out] = convert(Source.from_path(r))
    assert out.document is not None and len(out.document.text()) < 300_000


def test_a_tbl_table_in_a_man_page(tmp_path: Path) -> None:
    p = tmp_path / "tides.5"
    p.write_text(".TH TIDES 5\n.SH NAME\ntides \\- tide table\n.SH TABLE\n.TS\ntab(:) allbox;\nlb l\nl l.\n"
                 "Port:High water\n\\fBDover\\fR:06\\(en07\nT{\nlong cell\nT}:short\n.TE\nAfter the table.\n")
    [out] = convert(Source.from_path(p))
    doc = out.document
    assert doc is not None
    assert [b.text for b in doc.blocks if b.kind == "td"] == [
        "Port", "High water", "Dover", "06\u201307", "long cell", "short"]
    assert "allbox" not in doc.text() and "lb l" not in doc.text() and "After the table." in doc.text()
