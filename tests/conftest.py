"""Shared fixtures: a private deskdex home per test, the CLI run in-process or as a real process,
and generated documents of the first formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The console script as installed (make test installs the package first): tests run what users run,
# never the checkout on sys.path.
DESKDEX = str(Path(sys.executable).parent / "deskdex")
CORPUS = Path(os.environ.get("DESKDEX_CORPUS", "/tmp/corpora/mixed"))


@pytest.fixture(autouse=True)
def no_thread_leaks():
    """A test that leaves a thread running fails (watchdog's own conftest does the same)."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    assert not leaked, f"threads left running: {leaked}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


class CLI:
    def __init__(self, home: Path) -> None:
        self.home = home

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``deskdex`` as a real process, the way a user does."""
        e = dict(os.environ, DESKDEX_HOME=str(self.home), NO_COLOR="1", **(env or {}))
        p = subprocess.run([DESKDEX, *args], capture_output=True, text=True,
                           env=e, timeout=timeout, cwd=ROOT)
        if check and p.returncode != 0:
            raise AssertionError(f"deskdex {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)


@pytest.fixture
def cli(home: Path) -> CLI:
    return CLI(home)


def need_corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not built at {CORPUS}: run ../shared/corpus/build.sh")
    return CORPUS


def make_pdf(path: Path, title: str, author: str, paragraphs: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_author(author)
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    for para in paragraphs:
        pdf.multi_cell(0, 8, para)
        pdf.ln(8)
    pdf.output(str(path))
    return path


def make_docx(path: Path, title: str, author: str, heading: str, paragraphs: list[str],
              table: list[list[str]] | None = None) -> Path:
    import docx

    d = docx.Document()
    d.core_properties.title = title
    d.core_properties.author = author
    d.add_heading(heading, level=1)
    for para in paragraphs:
        d.add_paragraph(para)
    if table:
        t = d.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    d.save(str(path))
    return path
