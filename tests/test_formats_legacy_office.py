"""Excel 97-2003 workbooks (written here with xlwt) and password-protected OOXML files
(encrypted here with msoffcrypto-tool): converted, indexed and searched, or refused as
``encrypted`` / ``corrupt``."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import struct
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.detect import detect
from deskdex.converters.document import Document
from deskdex.converters.registry import default_registry

from .conftest import CLI


def make_xls(path: Path, owner: str = "Jane Doe") -> Path:
    import xlwt

    wb = xlwt.Workbook()
    wb.owner = owner
    budget = wb.add_sheet("Budget 2024")
    budget.write(0, 0, "Quarterly   zebra\nfigures")
    budget.write(0, 1, 42)
    budget.write(1, 0, 3.25)
    budget.write(1, 1, dt.date(2024, 3, 5), xlwt.easyxf(num_format_str="YYYY-MM-DD"))
    budget.write(2, 0, dt.datetime(2024, 3, 5, 14, 30), xlwt.easyxf(num_format_str="YYYY-MM-DD HH:MM"))
    budget.write(2, 1, True)
    budget.write(40, 0, "after the gap")
    staff = wb.add_sheet("Staff")
    staff.write(0, 0, "Alice Okapi")
    buf = io.BytesIO()
    wb.save(buf)
    # xlwt writes WRITEACCESS's user name bare, without the length and flags BIFF8 wants (and
    # Excel writes): rewritten here as Excel would, still padded with spaces to 112 bytes.
    data = buf.getvalue()
    raw = b"\x5c\x00\x70\x00" + owner.encode("ascii")
    assert data.count(raw) == 1
    name = struct.pack("<HB", len(owner), 0) + owner.encode("ascii")  # length, 8-bit characters
    path.write_bytes(data.replace(raw + b"   ", b"\x5c\x00\x70\x00" + name, 1))
    return path


def converted(path: Path) -> tuple[bool, str, Document | None]:
    outcome = convert(Source.from_path(path))[0]
    return outcome.ok, outcome.reason, outcome.document


def test_xls_sheets_cells_dates_and_author(tmp_path: Path) -> None:
    ok, reason, doc = converted(make_xls(tmp_path / "budget.xls"))
    assert ok, reason
    assert doc is not None and doc.mime == "application/vnd.ms-excel"
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("h", "Budget 2024"), ("td", "Quarterly zebra figures"), ("td", "42"), ("td", "3.25"),
        ("td", "2024-03-05"), ("td", "2024-03-05T14:30:00"), ("td", "TRUE"), ("td", "after the gap"),
        ("h", "Staff"), ("td", "Alice Okapi")]
    assert [b.level for b in doc.headings()] == [2, 2]
    assert doc.title == "budget.xls"
    assert doc.meta["modified_by"] == "Jane Doe"


def test_xls_detected_by_suffix_only() -> None:
    reg = default_registry()
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)
    assert detect(Source(uri="file:///old.xls", name="old.xls", data=ole), reg) == "application/vnd.ms-excel"
    # .doc, .ppt and .msg share the OLE magic: without the suffix, nothing claims it as a workbook.
    assert detect(Source(uri="file:///old", name="old", data=ole), reg) != "application/vnd.ms-excel"


def test_xls_corrupt_and_encrypted(tmp_path: Path) -> None:
    good = make_xls(tmp_path / "good.xls").read_bytes()
    (tmp_path / "cut.xls").write_bytes(good[:700])
    # Text named .xls (a CSV or HTML export under the old suffix) is indexed as text instead.
    (tmp_path / "junk.xls").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(range(256)) * 4)
    assert converted(tmp_path / "cut.xls")[:2] == (False, "corrupt")
    assert converted(tmp_path / "junk.xls")[:2] == (False, "corrupt")
    # A FILEPASS record (0x2F) right after the workbook's BOF is how Excel marks a password:
    # the record after BOF is given its opcode, as xlwt cannot encrypt.
    data = bytearray(good)
    bof = data.find(b"\x09\x08\x10\x00\x00\x06\x05\x00")
    assert bof > 0
    data[bof + 20:bof + 22] = b"\x2f\x00"
    (tmp_path / "locked.xls").write_bytes(bytes(data))
    assert converted(tmp_path / "locked.xls")[:2] == (False, "encrypted")


def _encrypted_ooxml(plain: bytes) -> bytes:
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(plain)).encrypt("hunter2", out)
    return out.getvalue()


def _docx() -> bytes:
    import docx

    d = docx.Document()
    d.add_paragraph("secret words")
    b = io.BytesIO()
    d.save(b)
    return b.getvalue()


def _xlsx() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws["A1"] = "secret cell"
    b = io.BytesIO()
    wb.save(b)
    return b.getvalue()


def _pptx() -> bytes:
    import pptx

    p = pptx.Presentation()
    p.slides.add_slide(p.slide_layouts[0]).shapes.title.text = "secret slide"  # type: ignore[union-attr]
    b = io.BytesIO()
    p.save(b)
    return b.getvalue()


@pytest.mark.parametrize("suffix, make", [("docx", _docx), ("xlsx", _xlsx), ("pptx", _pptx)])
def test_password_protected_ooxml_is_encrypted_not_corrupt(tmp_path: Path, suffix: str, make: object) -> None:
    assert callable(make)
    plain = make()
    f = tmp_path / f"locked.{suffix}"
    f.write_bytes(_encrypted_ooxml(plain))
    ok, reason, _ = converted(f)
    assert (ok, reason) == (False, "encrypted")
    # An OLE file of another kind under the same name has no password: it is converted as what
    # its streams say it is (converters/ole.py), here a workbook.
    (tmp_path / f"other.{suffix}").write_bytes(make_xls(tmp_path / "x.xls").read_bytes())
    ok, reason, doc = converted(tmp_path / f"other.{suffix}")
    assert ok, reason
    assert doc is not None and doc.mime == "application/vnd.ms-excel" and "Okapi" in doc.text()


@pytest.mark.slow
def test_index_and_search_xls(cli: CLI, tmp_path: Path) -> None:
    tree = tmp_path / "sheets"
    tree.mkdir()
    make_xls(tree / "budget.xls")
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["indexed"] == 1 and summary["failed"] == 0

    def found(*words: str) -> list[str]:
        return [os.path.basename(h["path"]) for h in cli.json("search", *words)["hits"]]

    assert found("zebra") == ["budget.xls"]
    assert found("okapi") == ["budget.xls"]
    assert found("type:sheet", "zebra") == ["budget.xls"]
    hit = cli.json("search", "okapi")["hits"][0]
    assert hit["title"] == "budget.xls"
