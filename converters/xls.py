"""Excel 97–2003 workbooks (XLS, BIFF8 in an OLE container) with xlrd.

Shaped as the XLSX converter (sheets.py), whose sheet and cell emitting it shares: each sheet's
name a level-2 heading, each non-empty cell a ``td``, numbers without a stray ``.0``, date cells
as ISO dates. The document properties (``ole.properties``: title, author, dates) are read with
olefile; the user name of the last save (the WRITEACCESS record) is the ``modified_by`` metadata;
the title is the properties' title, else the file name.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .document import Document
from deskdex.errors import CorruptFile, Encrypted
from .ole import open_ole, properties
from .sheets import emit_sheets
from .source import Source

if TYPE_CHECKING:  # xlrd is imported when a workbook is converted
    from xlrd.book import Book
    from xlrd.sheet import Sheet


def convert(source: Source, mime: str) -> Document:
    import xlrd

    data = source.read()
    log = io.StringIO()  # xlrd writes its warnings to a file (stdout by default)
    try:
        book = xlrd.open_workbook(file_contents=data, logfile=log, verbosity=0, on_demand=True,
                                  ignore_workbook_corruption=True)
    except Exception as exc:  # XLRDError, CompDocError, struct.error, IndexError... on damaged bytes
        if "encrypted" in str(exc).lower():
            raise Encrypted("Excel workbook is encrypted: it needs a password to be read") from exc
        raise CorruptFile(f"not a readable Excel 97-2003 workbook: {type(exc).__name__}: {exc}") from exc
    doc = Document(uri=source.uri, mime=mime)
    doc.meta.update(_properties(data))
    try:
        if (user := " ".join(str(book.user_name or "").split())):
            doc.meta["modified_by"] = user
        emit_sheets(doc, ((sheet.name, _rows(sheet, book.datemode)) for sheet in _sheets(book)))
    except Exception as exc:  # a sheet's records broken past what xlrd forgives
        raise CorruptFile(f"broken sheet in Excel 97-2003 workbook: {type(exc).__name__}: {exc}") from exc
    finally:
        book.release_resources()
    # As the XLSX converter: the properties' title, else the file name (a sheet name, "Sheet1", is no title).
    doc.title = doc.meta.pop("title", "") or source.name
    return doc


def _properties(data: bytes) -> dict[str, str]:
    """Title, author, dates... from the workbook's SummaryInformation (``ole.properties``)."""
    try:
        ole = open_ole(data, "Excel workbook")
    except CorruptFile:  # an Excel 95 file xlrd reads without an OLE container
        return {}
    try:
        return properties(ole)
    finally:
        ole.close()


def _sheets(book: Book) -> Iterator[Sheet]:
    """Worksheets one at a time (``on_demand``: a sheet is parsed when reached, then let go)."""
    for n in range(book.nsheets):
        sheet = book.sheet_by_index(n)
        yield sheet
        book.unload_sheet(n)


def _rows(sheet: Sheet, datemode: int) -> Iterator[list[object]]:
    import xlrd

    for r in range(sheet.nrows):
        yield [_value(cell.ctype, cell.value, datemode, xlrd) for cell in sheet.row(r)]


def _value(ctype: int, value: Any, datemode: int, xlrd: Any) -> object:
    """A cell as the Python value ``cell_text`` formats: dates as dates, booleans as booleans."""
    if ctype == xlrd.XL_CELL_DATE:
        try:
            when: dt.datetime = xlrd.xldate_as_datetime(value, datemode)
        except Exception:  # out of range for the book's date system: keep the number
            return float(value)
        if float(value) < 1:  # a time of day alone
            return when.time()
        return when.date() if when.time() == dt.time() else when
    if ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(value)
    if ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(value, "")
    if ctype in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    return value
