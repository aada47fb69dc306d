"""Excel workbooks (XLSX, XLSM, XLTX, XLTM) with openpyxl in read-only mode.

Each sheet's name becomes a level-2 heading and each non-empty cell a ``td`` block, row by
row, with cached formula results rather than formulas. A workbook of millions of numbers
would swamp the index and the worker, so cells are capped (``MAX_CELLS``) and the document
says ``partial`` past the cap (every sheet's name is still kept). openpyxl parses through
defusedxml (entities refused).
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import warnings
import zipfile
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .document import Document
from deskdex.errors import CorruptFile
from .limits import left_out
from .slides import core_properties
from .source import Source
from .zipcheck import open_zip

if TYPE_CHECKING:  # openpyxl is imported when a workbook is converted
    from openpyxl.workbook.workbook import Workbook

logger = logging.getLogger(__name__)

MAX_CELLS = 200_000
MAX_EMPTY_ROWS = 10_000  # a run of empty rows this long ends a sheet: stray formatting far below the data


def convert(source: Source, mime: str) -> Document:
    from openpyxl import load_workbook

    data = source.read()
    # openpyxl fills a missing date with the current time; such dates are dropped below.
    opened = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=5)
    open_zip(data, "Excel workbook")  # refuses bombs (and says so of a password-protected one) first
    with warnings.catch_warnings():  # openpyxl warns about every extension it does not read
        warnings.simplefilter("ignore")
        try:
            try:
                wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False)
            except KeyError as exc:
                if "sharedStrings.xml" not in str(exc):
                    raise
                # Writers that use only inline strings may still list a shared-strings part.
                wb = load_workbook(io.BytesIO(_with_shared_strings(data, str(exc))), read_only=True,
                                   data_only=True, keep_links=False)
        except Exception as exc:  # openpyxl raises KeyError, ValueError, TypeError, zip and XML errors
            raise CorruptFile(f"not a readable Excel workbook: {type(exc).__name__}: {exc}") from exc
        try:
            doc = Document(uri=source.uri, mime=mime)
            doc.meta.update(core_properties(wb.properties))
            for key in ("created", "modified"):
                if getattr(wb.properties, key, None) and getattr(wb.properties, key) >= opened:
                    del doc.meta[key]
            _sheets(doc, wb)
        except (KeyError, ValueError, TypeError, AttributeError, zipfile.BadZipFile) as exc:
            raise CorruptFile(f"broken sheet in Excel workbook: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # defusedxml refusals and XML syntax errors surface while rows stream
            raise CorruptFile(f"unreadable sheet XML: {type(exc).__name__}: {exc}") from exc
        finally:
            wb.close()
    doc.title = doc.meta.pop("title", "") or source.name
    return doc


_EMPTY_SST = b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="0" uniqueCount="0"/>'


def _with_shared_strings(data: bytes, error: str) -> bytes:
    """The workbook with the empty shared-strings part it names but lacks."""
    name = error.split("'")[1] if error.count("'") >= 2 else "xl/sharedStrings.xml"
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr(name, _EMPTY_SST)
    return out.getvalue()


def _sheets(doc: Document, wb: Workbook) -> None:
    emit_sheets(doc, ((ws.title, ws.iter_rows(values_only=True) if hasattr(ws, "iter_rows") else None)
                      for ws in wb.worksheets))  # no rows: a chart sheet


def emit_sheets(doc: Document, sheets: Iterable[tuple[str, Iterable[Sequence[object]] | None]]) -> None:
    """Each sheet's name as a level-2 heading, then each non-empty cell (``cell_text``) as a ``td``,
    row by row; a long run of empty rows ends a sheet. Past ``MAX_CELLS`` the workbook's other cells
    are left out, never silently: the document says ``partial`` (``limits.left_out``), and every
    later sheet's name is still kept (they cost nothing; their rows are not read)."""
    cells = 0
    full = False
    for title, rows in sheets:
        doc.add("h", title, level=2)
        if rows is None or full:
            continue
        empty = 0
        for row in rows:
            texts = [t for t in (cell_text(v) for v in row) if t]
            if not texts:
                empty += 1
                if empty >= MAX_EMPTY_ROWS:
                    break
                continue
            empty = 0
            room = MAX_CELLS - cells
            for t in texts[:room]:
                doc.add("td", t)
            cells += min(len(texts), room)
            if len(texts) > room:  # a cell with text is dropped: only then is the workbook partial
                full = True
                break
    if full:
        left_out(doc, f"cells after the first {MAX_CELLS:,} left out (the cells one workbook keeps)")


def cell_text(value: object) -> str:
    """A cell's value as text: whole floats without ``.0``, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return " ".join(str(value).split())
