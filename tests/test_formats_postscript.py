"""PostScript and EPS through Ghostscript (issue 16): PostScript made here by groff and by hand,
plain, gzip'd and DOS binary EPS; title, author and date from the DSC comments; a missing
Ghostscript is ``helper_missing``, junk ``corrupt``, a program that never ends ``timeout``."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from deskdex.converters import Limits, Source, convert
from deskdex.converters.document import Document
from deskdex.converters.registry import default_registry, which

from .conftest import CLI, need_corpus

pytestmark = pytest.mark.skipif(shutil.which("gs") is None, reason="Ghostscript (gs) is not installed")

ROFF = r""".TH ZEBRA 1 "2026-01-01" "zoo 1.0" "Zoo Manual"
.SH NAME
zebra \- the quarterly zebra report
.SH DESCRIPTION
Zebras graze on the savanna near the riverbank, with efficient office workflow.
.SH RESULTS
The second section counts okapis and flamingos.
.bp
Page two tells of the quagga.
"""

EPS = b"""%!PS-Adobe-3.0 EPSF-3.0
%%BoundingBox: 0 0 300 100
%%Title: (Okapi \\(label\\))
%%For: Jane Quagga
%%CreationDate: (D:20240305120000)
%%EndComments
/Helvetica findfont 12 scalefont setfont
10 50 moveto (Okapi sanctuary map) show
showpage
%%EOF
"""


def groff_ps(path: Path, dsc: bytes = b"") -> Path:
    """PostScript from groff (man macros), with ``dsc`` comments put after its first line."""
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    ps = subprocess.run(["groff", "-man", "-Tps"], input=ROFF.encode(), capture_output=True, check=True).stdout
    first, _, rest = ps.partition(b"\n")
    path.write_bytes(first + b"\n" + dsc + rest)
    return path


def converted(path: Path, limits: Limits = Limits()) -> tuple[str, str, Document | None]:
    outcome = convert(Source.from_path(path), limits=limits)[0]
    return outcome.reason, outcome.message, outcome.document


def test_groff_postscript_text_title_author_and_dates(tmp_path: Path) -> None:
    reason, message, doc = converted(groff_ps(tmp_path / "zebra.ps",
                                              b"%%Title: The Quarterly Zebra Report\n%%For: (Alice Example)\n"))
    assert doc is not None, (reason, message)
    assert doc.mime == "application/postscript" and doc.title == "The Quarterly Zebra Report"
    text = " ".join(doc.text().split())
    assert "Zebras graze on the savanna near the riverbank" in text
    assert "efficient office workflow" in text  # ligatures read as letters
    assert "Page two tells of the quagga" in text  # the second page
    assert doc.meta["author"] == "Alice Example" and doc.meta["creator"].startswith("groff version")
    assert doc.meta["created"][:4].isdigit() and "T" in doc.meta["created"]  # "Thu Dec  3 ..." as ISO 8601
    assert doc.meta["pages"] == "2" and "content" not in doc.meta
    assert "Zoo Manual" not in doc.body_text()  # the running head, on both pages, is boilerplate


def test_groff_postscript_without_a_title_is_named_by_its_first_line(tmp_path: Path) -> None:
    reason, message, doc = converted(groff_ps(tmp_path / "plain.ps"))
    assert doc is not None, (reason, message)
    assert "quarterly zebra report" in doc.title  # the running head is boilerplate, not the title
    assert any(b.boilerplate and "Zoo Manual" in b.text for b in doc.blocks)


def test_eps_plain_and_gzipped_with_dsc_metadata(tmp_path: Path) -> None:
    (tmp_path / "label.eps").write_bytes(EPS)
    (tmp_path / "label2.eps.gz").write_bytes(gzip.compress(EPS))
    for name in ("label.eps", "label2.eps.gz"):
        reason, message, doc = converted(tmp_path / name)
        assert doc is not None, (name, reason, message)
        assert doc.title == "Okapi (label)", name  # a PostScript string, parentheses unescaped
        assert "Okapi sanctuary map" in doc.text() and doc.meta["eps"] == "yes"
        assert doc.meta["author"] == "Jane Quagga" and doc.meta["created"] == "2024-03-05T12:00:00"
    assert doc.meta["compression"] == "application/gzip"


def test_dos_binary_eps_and_values_at_end(tmp_path: Path) -> None:
    program = (EPS.replace(b"%%Title: (Okapi \\(label\\))", b"%%Title: (atend)")
               .replace(b"%%EOF", b"%%Trailer\n%%Title: Late okapi title\n%%EOF"))
    preview = b"\x00" * 64  # where a TIFF preview would be
    header = b"\xc5\xd0\xd3\xc6" + struct.pack("<IIIIIIH", 30, len(program), 0, 0, 30 + len(program), len(preview),
                                               0xFFFF)
    (tmp_path / "binary.eps").write_bytes(header + program + preview)
    reason, message, doc = converted(tmp_path / "binary.eps")
    assert doc is not None, (reason, message)
    assert doc.title == "Late okapi title" and "Okapi sanctuary map" in doc.text()


def test_only_the_header_comments_name_the_document(tmp_path: Path) -> None:
    (tmp_path / "report.ps").write_bytes(
        b"%!PS-Adobe-3.0\n%%Creator: hand\n/Helvetica findfont 12 scalefont setfont\n"
        b"%%BeginDocument: figure.eps\n%%Title: figure.eps\n%%For: someone else\n%%EndDocument\n"
        b"72 700 moveto (Hartebeest migration report) show showpage\n")
    reason, message, doc = converted(tmp_path / "report.ps")
    assert doc is not None, (reason, message)
    assert doc.title == "Hartebeest migration report" and "author" not in doc.meta  # not the figure's


def test_drawing_without_text_is_a_document_without_content(tmp_path: Path) -> None:
    (tmp_path / "box.ps").write_bytes(b"%!PS-Adobe-3.0\n%%Title: A box\n%%EndComments\n"
                                      b"newpath 10 10 moveto 100 0 rlineto 0 100 rlineto closepath stroke showpage\n")
    reason, message, doc = converted(tmp_path / "box.ps")
    assert doc is not None, (reason, message)
    assert doc.title == "A box" and doc.meta["content"] == "none" and not doc.blocks


@pytest.mark.parametrize("data", [b"\x00\x01\x02 not PostScript at all \xff" * 20,
                                  b"%!PS-Adobe-3.0\n%%Title: cut\n/Helvetica findfont 12 scalefont setfont (unfinished",
                                  b"%!PS\n/x { undefinedoperator } def x showpage\n"])
def test_junk_and_truncated_postscript_is_corrupt(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "bad.ps").write_bytes(data)
    reason, message, doc = converted(tmp_path / "bad.ps")
    assert doc is None and reason == "corrupt", (reason, message)


def test_a_program_that_never_ends_stops_at_the_time_limit(tmp_path: Path) -> None:
    (tmp_path / "loop.ps").write_bytes(b"%!PS\n{ 1 pop } loop\n")
    reason, message, doc = converted(tmp_path / "loop.ps", Limits(time_seconds=2))
    assert doc is None and reason == "timeout", (reason, message)


@pytest.fixture
def no_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A PATH with no helper program on it (``which`` remembers what it found: forgotten here)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    which.cache_clear()
    yield
    which.cache_clear()


def test_missing_ghostscript_is_helper_missing(tmp_path: Path, no_helpers: None) -> None:
    (tmp_path / "label.eps").write_bytes(EPS)
    reason, message, doc = converted(tmp_path / "label.eps")
    assert doc is None and reason == "helper_missing" and "apt-get install ghostscript" in message
    ps = next(f for f in default_registry().formats if f.name == "PostScript")
    assert [n.install for n in ps.missing()] == ["apt-get install ghostscript", "apt-get install poppler-utils"]


def test_missing_pdftotext_is_helper_missing_too(tmp_path: Path, no_helpers: None) -> None:
    gs = shutil.which("gs", path="/usr/local/bin:/usr/bin:/bin")
    assert gs is not None
    (tmp_path / "empty-bin" / "gs").symlink_to(gs)  # Ghostscript alone on PATH
    (tmp_path / "label.eps").write_bytes(EPS)
    reason, message, doc = converted(tmp_path / "label.eps")
    assert doc is None and reason == "helper_missing" and "apt-get install poppler-utils" in message


def test_formats_command_names_ghostscript_when_missing(cli: CLI, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    out = cli.run("formats", "--json", env={"PATH": str(empty)}).stdout
    formats = {f["name"]: f for f in json.loads(out)["formats"]}
    assert not formats["PostScript"]["available"]
    assert formats["PostScript"]["missing"] == [{"names": ["gs"], "install": "apt-get install ghostscript"},
                                                {"names": ["pdftotext"], "install": "apt-get install poppler-utils"}]
    assert {n["install"] for n in formats["DjVu"]["missing"]} == {"apt-get install djvulibre-bin"}
    assert formats["FictionBook"]["available"] and formats["Gnumeric"]["available"]


def test_corpus_postscript_converts_with_title(tmp_path: Path) -> None:
    corpus = need_corpus()
    files = sorted(p for pattern in ("*.ps", "*.eps", "*.ps.gz", "*.eps.gz") for p in corpus.rglob(pattern))
    if not files:
        pytest.skip(f"no PostScript in the corpus at {corpus}")
    with_text = 0
    for path in files:
        reason, message, doc = converted(path)
        assert doc is not None, (path, reason, message)
        assert doc.title.strip(), path
        # Drawings made of paths and images (a GIMP export, CorelDRAW logos) have no text to find.
        assert doc.blocks or doc.meta.get("content") == "none", path
        with_text += bool(doc.blocks)
    assert with_text >= 2  # psfrag's example.eps.gz and testfig.eps draw text
