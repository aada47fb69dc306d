"""The search window's preview pane: the selected result's text (the daemon's ``document`` op, as the
web page's /doc shows it) with every place the query matches highlighted, "Previous hit"/"Next hit"
to move between them (the current one in a stronger colour, scrolled into view), the page each
block of a paged document starts on, and "Open at page N" where the document's viewer takes a page
(viewers.py).

The text is built into the QTextDocument block by block with a QTextCursor, not as HTML, so that the
position of each hit is known exactly (the cursor's, in the document's own UTF-16 units): moving to a
hit selects it there, whatever characters come before it. It is added CHUNK blocks at a time between
the window's events: a long document shows its start at once, and the window never waits for the rest."""

from __future__ import annotations

import html
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextBrowser, QTextEdit, QVBoxLayout, QWidget

from deskdex.errors import DeskdexError, QueryError

from .caller import Caller

if TYPE_CHECKING:
    from deskdex.protocol import DocumentAnswer, SearchHit

logger = logging.getLogger(__name__)

MAX_BLOCKS = 5000  # blocks shown at most: a long book's first few hundred pages
CHUNK = 100  # blocks added per turn of the event loop, which waits 30-80 ms at most (benchmarks/tray_preview.py)
DELAY_MS = 120  # after the selection moves: arrowing down a list asks for the document it stops on only
MARK = QColor("#fff176")  # every hit
CURRENT = QColor("#ff9800")  # the hit moved to

OpenAtPage = Callable[[str, str, int], None]  # path, MIME type, page


class Preview(QWidget):
    """The preview of one hit at a time, asked of ``caller``; ``open_at_page`` opens a file at a page."""

    def __init__(self, caller: Caller, open_at_page: OpenAtPage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.caller, self.open_at_page = caller, open_at_page
        self.title = QLabel(" ")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        self.previous_button = QPushButton("◀ Previous hit")
        self.next_button = QPushButton("Next hit ▶")
        self.position = QLabel(" ")
        self.page_button = QPushButton("Open at page")
        self.previous_button.clicked.connect(self.previous_hit)
        self.next_button.clicked.connect(self.next_hit)
        self.page_button.clicked.connect(self._open_page)
        row = QHBoxLayout()
        for w in (self.previous_button, self.next_button, self.position):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.page_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.text, 1)
        layout.addLayout(row)
        self.timer = QTimer(self, singleShot=True, interval=DELAY_MS)
        self.timer.timeout.connect(self._request)
        self.filler = QTimer(self, interval=0)  # adds the next chunk of text once the events waiting are handled
        self.filler.timeout.connect(self._step)
        self._filling: Iterator[bool] | None = None
        self._target: int | None = None
        self._started = 0.0
        self._seq = 0
        self._wanted: tuple[SearchHit, str] | None = None
        self.doc: DocumentAnswer | None = None
        self.hits: list[tuple[int, int, int | None]] = []  # each hit's start, end in the text, and its page
        self.current = -1
        self.clear()

    # -- asking
    def show_hit(self, hit: SearchHit | None, query: str) -> None:
        """Preview ``hit`` with the matches of ``query`` (after DELAY_MS); None clears the pane."""
        self._seq += 1
        if hit is None or not hit.get("uri"):
            self.timer.stop()
            self.clear()
            return
        self._wanted = (hit, query)
        self.timer.start()

    def _request(self) -> None:
        if self._wanted is None:
            return
        hit, query = self._wanted
        seq = self._seq
        self.title.setText(f"<b>{html.escape(hit.get('title') or os.path.basename(hit.get('path') or ''))}</b>"
                           " <i>loading…</i>")

        def failed(error: DeskdexError) -> None:
            if seq != self._seq:
                return
            if isinstance(error, QueryError) and query:  # the text still shows, without marks (as the web's)
                self.caller.request("document", lambda d: self._shown(seq, d, hit), lambda e: self._failed(seq, e),
                                    uri=hit["uri"], query="", max_blocks=MAX_BLOCKS)
                return
            self._failed(seq, error)

        self.caller.request("document", lambda d: self._shown(seq, d, hit), failed, uri=hit["uri"], query=query,
                            max_blocks=MAX_BLOCKS)

    def _failed(self, seq: int, error: DeskdexError) -> None:
        if seq != self._seq:
            return
        self.clear()
        self.title.setText(f"<span style='color:#c62828'>{html.escape(str(error))}</span>")

    # -- showing
    def clear(self) -> None:
        self._filling = None
        self.doc, self.hits, self.current = None, [], -1
        self.text.clear()
        self.text.setExtraSelections([])
        self.title.setText(" ")
        self._update_controls()

    def _shown(self, seq: int, answer: dict[str, Any], hit: SearchHit) -> None:
        if seq != self._seq:  # the selection moved on meanwhile
            return
        doc: DocumentAnswer = answer  # type: ignore[assignment]  # the document op's answer
        self.doc = doc
        meta = [doc.get("mime") or "", time.strftime("%Y-%m-%d", time.localtime(doc["mtime"])) if doc.get("mtime")
                else "", f"{doc['pages']} pages" if doc.get("pages") else ""]
        name = doc.get("title") or os.path.basename(doc.get("path") or "") or doc["uri"]
        self.title.setText(f"<b>{html.escape(name)}</b><br><span style='color:#666666'>"
                           f"{html.escape(' · '.join(m for m in meta if m))}</span>")
        self.hits, self.current = [], -1
        self.text.setExtraSelections([])
        out = QTextDocument(self.text)  # parented to the pane: setDocument deletes the one it replaces
        out.setDefaultFont(self.text.font())
        self.text.setDocument(out)
        self._target = hit.get("page")  # the hit the result's snippet showed: the first on its page
        self._started = time.perf_counter()
        self._filling = self._fill(doc, out)
        self._step()  # the first blocks at once: what the pane shows first is there without a wait
        if self._filling is not None:
            self.filler.start()

    def show_answer(self, answer: dict[str, Any], hit: SearchHit | dict[str, Any]) -> None:
        """Show a document op's ``answer`` for ``hit`` now, as if just asked (benchmarks/tray_preview.py)."""
        self._seq += 1
        self._shown(self._seq, answer, hit)  # type: ignore[arg-type]  # a hit's uri and page are read

    def loading(self) -> bool:
        """Whether the text is still being added to the pane."""
        return self._filling is not None or self.timer.isActive()

    def _step(self) -> None:
        if self._filling is None:
            self.filler.stop()
            return
        done = next(self._filling, True)
        if self.current < 0 and self.hits:
            first = next((i for i, h in enumerate(self.hits) if self._target is None or h[2] == self._target), None)
            if first is not None or done:
                self.go_to(first or 0)
        if done:
            self._filling = None
            self.filler.stop()
            logger.debug("preview of %d blocks built in %.0f ms", len(self.doc["blocks"]) if self.doc else 0,
                         (time.perf_counter() - self._started) * 1000)
        self._update_controls()

    def _fill(self, doc: DocumentAnswer, out: QTextDocument) -> Iterator[bool]:
        """Add ``doc``'s blocks to ``out``, CHUNK at a time (yielding False after each, so the window
        handles its events between them: 5,000 blocks take about 0.6 s), each hit's place
        in ``self.hits``. A QTextCursor, not HTML, so that each hit's position is known exactly."""
        cur = QTextCursor(out)
        plain, marked = QTextCharFormat(), QTextCharFormat()
        marked.setBackground(MARK)
        heading = QTextCharFormat()
        heading.setFontWeight(QFont.Weight.Bold)
        heading.setFontPointSize(self.text.font().pointSizeF() * 1.2)
        page_line = QTextCharFormat()
        page_line.setForeground(QColor("#777777"))
        page_line.setFontItalic(True)
        page, first = None, True
        blocks = doc["blocks"]
        for at_block in range(0, len(blocks), CHUNK):
            cur.beginEditBlock()  # one layout per chunk, not one per insertion
            for block in blocks[at_block:at_block + CHUNK]:
                if block.get("page") and block["page"] != page:
                    page = block["page"]
                    if not first:
                        cur.insertBlock()
                    cur.insertText(f"— page {page} —", page_line)
                    first = False
                if not first:
                    cur.insertBlock()
                first = False
                fmt = heading if block["kind"] == "h" else plain
                text, at = block["text"], 0
                if block["kind"] == "li":
                    cur.insertText("• ", fmt)
                for start, end in sorted(block["marks"]):
                    if start < at:  # overlapping ranges: the first one wins
                        continue
                    cur.insertText(text[at:start], fmt)
                    begin = cur.position()
                    both = QTextCharFormat(fmt)
                    both.merge(marked)
                    cur.insertText(text[start:end], both)
                    self.hits.append((begin, cur.position(), page))
                    at = end
                cur.insertText(text[at:], fmt)
            cur.endEditBlock()
            if at_block + CHUNK < len(blocks):
                yield False
        if doc.get("truncated"):
            cur.insertBlock()
            cur.insertText(f"(the first {len(blocks):,} blocks shown)", page_line)
        if not blocks:
            cur.insertText("No text was extracted from this document.", page_line)
        yield True

    # -- moving between hits
    def next_hit(self) -> None:
        if self.hits:
            self.go_to((self.current + 1) % len(self.hits))

    def previous_hit(self) -> None:
        if self.hits:
            self.go_to((self.current - 1) % len(self.hits))

    def go_to(self, n: int) -> None:
        """Select hit ``n`` (0-based), in CURRENT's colour, and scroll it into view."""
        self.current = n
        start, end, _ = self.hits[n]
        cur = QTextCursor(self.text.document())
        cur.setPosition(start)
        cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        sel = QTextEdit.ExtraSelection()
        sel.cursor = cur
        fmt = QTextCharFormat()
        fmt.setBackground(CURRENT)
        sel.format = fmt
        self.text.setExtraSelections([sel])
        shown = QTextCursor(self.text.document())
        shown.setPosition(start)
        self.text.setTextCursor(shown)
        self.text.ensureCursorVisible()
        self._update_controls()

    def current_text(self) -> str:
        """The text of the hit moved to ("" with none)."""
        if self.current < 0:
            return ""
        start, end, _ = self.hits[self.current]
        cur = QTextCursor(self.text.document())
        cur.setPosition(start)
        cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        return cur.selectedText()

    def current_page(self) -> int | None:
        if self.current >= 0:
            return self.hits[self.current][2]
        blocks = self.doc["blocks"] if self.doc else []
        return next((b["page"] for b in blocks if b.get("page")), None)

    def _update_controls(self) -> None:
        n = len(self.hits)
        for b in (self.previous_button, self.next_button):
            b.setEnabled(n > 1 or (n == 1 and self.current < 0))
        page = self.current_page()
        if self.doc is None:
            self.position.setText(" ")
        elif not n:
            self.position.setText("no hit yet…" if self._filling is not None else "no hit in the text shown")
        else:
            more = "…" if self._filling is not None else ""  # more hits may come with the rest of the text
            self.position.setText(f"hit {self.current + 1} of {n}{more}" + (f" · page {page}" if page else ""))
        # an archive's member has its archive's path: no viewer opens the member at a page of its own
        path = self.doc.get("path") if self.doc and "#" not in self.doc["uri"] else ""
        self.page_button.setVisible(bool(page and path and self.doc and self.doc.get("pages")))
        self.page_button.setText(f"Open at page {page}")

    def _open_page(self) -> None:
        page = self.current_page()
        if self.doc and self.doc.get("path") and "#" not in self.doc["uri"] and page:
            self.open_at_page(self.doc["path"], self.doc.get("mime") or "", page)
