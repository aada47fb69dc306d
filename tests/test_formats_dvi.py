"""DVI through catdvi, as Recoll reads it: a document typeset here with plain TeX (``tex``, which
catdvi's own Debian package depends on), also gzip'd; the corpus's two ``.dvi.gz`` manuals; junk and
a truncated file are ``corrupt``, a missing catdvi ``helper_missing``."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.document import Document
from deskdex.converters.registry import which

CORPUS = Path("/tmp/corpora/mixed")
needs_catdvi = pytest.mark.skipif(shutil.which("catdvi") is None, reason="catdvi is not installed (Debian catdvi)")

PLAIN_TEX = r"""\centerline{Herons of the Marsh}
\bigskip
The grey heron stands still in the shallows. It is difficult to see, and its
patience is legendary among wading birds.

The egret is smaller and white.
\vfill\eject
Bitterns boom at dusk on the second page.
\vfill\eject
Rails hide in the reeds on the third.
\bye
"""


def typeset(tmp: Path) -> Path:
    """Three pages of plain TeX, each with its page number at the foot."""
    if shutil.which("tex") is None:
        pytest.skip("tex is not installed (Debian texlive-binaries, which catdvi depends on)")
    (tmp / "herons.tex").write_text(PLAIN_TEX)
    subprocess.run(["tex", "-interaction=batchmode", "herons.tex"], cwd=tmp, check=True, capture_output=True)
    return tmp / "herons.dvi"


def converted(path: Path) -> tuple[str, str, Document | None]:
    outcome = convert(Source.from_path(path))[0]
    return outcome.reason, outcome.message, outcome.document


@needs_catdvi
def test_dvi_text_title_pages_and_date(tmp_path: Path) -> None:
    reason, message, doc = converted(typeset(tmp_path))
    assert doc is not None, (reason, message)
    assert doc.mime == "application/x-dvi" and doc.title == "Herons of the Marsh"
    assert doc.meta["pages"] == "3" and doc.meta["created"][:4].isdigit()  # TeX's date in the preamble
    body = [b.text for b in doc.blocks if not b.boilerplate]
    # Lines joined into paragraphs; "ffi" is one glyph in TeX's font (U+FB03 from catdvi), spelled out.
    assert any(p.endswith("It is difficult to see, and its patience is legendary among wading birds.") for p in body)
    assert body[-3:] == ["The egret is smaller and white.", "Bitterns boom at dusk on the second page.",
                         "Rails hide in the reeds on the third."]
    assert [b.text for b in doc.blocks if b.boilerplate] == ["1", "2", "3"]  # the page numbers


@needs_catdvi
def test_gzipped_dvi_is_one_document(tmp_path: Path) -> None:
    dvi = typeset(tmp_path)
    packed = tmp_path / "herons.dvi.gz"
    packed.write_bytes(gzip.compress(dvi.read_bytes()))
    reason, message, doc = converted(packed)
    assert doc is not None and doc.mime == "application/x-dvi", (reason, message)
    assert doc.title == "Herons of the Marsh" and "Bitterns boom" in doc.body_text()


@needs_catdvi
@pytest.mark.corpus
@pytest.mark.parametrize("name,title,phrase", [
    ("maintain.dvi.gz", "Information for Maintainers of GNU", "FSF system administrators"),
    ("standards.dvi.gz", "GNU Coding Standards", "minimum of what is important"),
])
def test_corpus_dvi_gz(name: str, title: str, phrase: str) -> None:
    f = CORPUS / "deb/gnu-standards" / name
    if not f.is_file():
        pytest.skip(f"{f} absent (the corpus is built by shared/corpus/build.sh)")
    reason, message, doc = converted(f)
    assert doc is not None, (reason, message)
    assert doc.title == title and phrase in doc.body_text() and int(doc.meta["pages"]) > 50


@needs_catdvi
@pytest.mark.parametrize("kind", ["junk", "truncated"])
def test_junk_and_truncated_dvi_is_corrupt(tmp_path: Path, kind: str) -> None:
    bad = tmp_path / "bad.dvi"
    if kind == "junk":
        bad.write_bytes(b"\x00\x01 not a DVI file \xff" * 10)
    else:
        bad.write_bytes(typeset(tmp_path).read_bytes()[:300])  # a valid preamble, then the file ends
    reason, message, doc = converted(bad)
    assert doc is None and reason == "corrupt", (reason, message)


def test_missing_catdvi_is_helper_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dvi = typeset(tmp_path)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    which.cache_clear()
    try:
        reason, message, doc = converted(dvi)
    finally:
        which.cache_clear()
    assert doc is None and reason == "helper_missing" and "apt-get install catdvi" in message
