"""The search window: a box that searches as you type, results with title, path, date and a snippet with
the matched words in bold, and the number of near-duplicates it stands for, expandable to their paths.

Keys: Enter opens the selected result (the first if none is), Ctrl+Enter opens its folder, Down moves from
the box to the results, Escape hides the window."""

from __future__ import annotations

import html
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import (QAbstractTextDocumentLayout, QDesktopServices, QKeyEvent, QPainter, QPalette,
                           QShowEvent, QTextDocument)
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QLabel, QLineEdit, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from deskdex.errors import DeskdexError

from ..render import terminal_safe
from .caller import Caller

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit

logger = logging.getLogger(__name__)

DEBOUNCE_MS = 200  # long enough to skip the keystrokes of a word typed fast, short enough to feel instant
LIMIT = 50
HIT_ROLE = Qt.ItemDataRole.UserRole + 1   # the hit as the daemon sent it (top-level items)
HTML_ROLE = Qt.ItemDataRole.UserRole + 2  # what the delegate paints
PATH_ROLE = Qt.ItemDataRole.UserRole + 3  # the file Enter opens (copies too)


def open_path(path: str) -> None:
    """Open a file or folder with the desktop's default application."""
    if not QDesktopServices.openUrl(QUrl.fromLocalFile(path)):
        logger.warning("no application opened %s", path)


def snippet_html(snippet: str, spans: list[list[int]] | None) -> str:
    """The snippet escaped, with the character ranges in ``spans`` in bold."""
    out, pos = [], 0
    for start, end in sorted(spans or []):
        if start < pos:  # overlapping ranges: the first one wins
            continue
        out.append(html.escape(snippet[pos:start]))
        out.append("<b>" + html.escape(snippet[start:end]) + "</b>")
        pos = end
    out.append(html.escape(snippet[pos:]))
    return "".join(out)


def as_rich_text(text: str) -> str:
    """``text`` for a tooltip, which Qt reads as HTML when it guesses it is (a name with "<b>" in
    it): always HTML, escaped, so it shows as written."""
    return f"<p style='white-space:pre'>{html.escape(text)}</p>"


def copies_text(n: int) -> str:
    return f"{n} near-duplicate{'' if n == 1 else 's'}" if n else ""


class SearchWindow(QWidget):
    def __init__(self, caller: Caller, opener: Callable[[str], None] = open_path,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.caller, self.opener = caller, opener
        self.setWindowTitle("deskdex search")
        self.resize(720, 520)
        self.box = QLineEdit(placeholderText="Search… (words, \"phrases\", title:, ext:, after:…)")
        self.box.setClearButtonEnabled(True)
        self.info = QLabel(" ")
        self.results = QTreeWidget()
        self.results.setHeaderHidden(True)
        self.results.setItemDelegate(HtmlDelegate(self.results))
        self.results.setUniformRowHeights(False)
        self.results.setRootIsDecorated(True)
        layout = QVBoxLayout(self)
        for w in (self.box, self.info, self.results):
            layout.addWidget(w)
        self.timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self.timer.timeout.connect(self.search_now)
        self.box.textChanged.connect(lambda _: self.timer.start())
        self.results.itemActivated.connect(lambda item, _col: self.open_item(item))
        self.results.itemExpanded.connect(self._expand)
        self.box.installEventFilter(self)
        self.results.installEventFilter(self)
        self._seq = 0  # number of the newest search: answers to older ones arriving late are dropped

    # -- searching
    def search_now(self) -> None:
        self._seq += 1
        seq, query = self._seq, self.box.text().strip()
        if not query:
            self.results.clear()
            self.info.setText(" ")
            return
        self.caller.request("search", lambda r: self._show(seq, r), lambda e: self._failed(seq, e),
                            query=query, limit=LIMIT)

    def _show(self, seq: int, result: dict[str, Any]) -> None:
        if seq != self._seq:  # an answer to a query typed over since
            return
        self.results.clear()
        hits: list[SearchHit] = result.get("hits", [])  # the search op's answer
        total = result.get("total", len(hits))
        self.info.setText(f"{total} result{'s' if total != 1 else ''}" + (f", first {len(hits)} shown"
                                                                          if total > len(hits) else ""))
        for hit in hits:
            self.results.addTopLevelItem(self._item(hit))
        if hits and (first := self.results.topLevelItem(0)) is not None:
            self.results.setCurrentItem(first)

    def _failed(self, seq: int, error: DeskdexError) -> None:
        if seq != self._seq:
            return
        self.results.clear()
        self.info.setText(f"<span style='color:#c62828'>{html.escape(str(error))}</span>")

    def _item(self, hit: SearchHit) -> QTreeWidgetItem:
        path = hit.get("path") or hit.get("uri", "")
        # A bidi override or a control character written out: no name passes for another.
        shown = terminal_safe(path)
        date = time.strftime("%Y-%m-%d", time.localtime(hit["mtime"])) if hit.get("mtime") else ""
        dups = int(hit.get("duplicates") or 0)
        item = QTreeWidgetItem()
        plain = [terminal_safe(hit.get("title") or os.path.basename(path)), shown, date, copies_text(dups)]
        item.setText(0, " — ".join(p for p in plain if p))
        item.setToolTip(0, as_rich_text(shown))
        item.setData(0, HIT_ROLE, hit)
        item.setData(0, PATH_ROLE, path)
        badge = f" <span class='copies'>[{copies_text(dups)}]</span>" if dups else ""
        item.setData(0, HTML_ROLE,
                     f"<b>{html.escape(plain[0])}</b>{badge}<br><span class='path'>{html.escape(shown)}"
                     f" · {date}</span><br>{snippet_html(hit.get('snippet', ''), hit.get('highlights'))}")
        if dups:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
        return item

    # -- copies, asked for on first expansion
    def _expand(self, item: QTreeWidgetItem) -> None:
        hit = item.data(0, HIT_ROLE)
        if not hit or item.childCount():
            return

        def show(result: dict[str, Any]) -> None:
            for p in result.get("paths", []):
                child = QTreeWidgetItem([terminal_safe(p)])
                child.setData(0, PATH_ROLE, p)
                child.setData(0, HTML_ROLE, html.escape(terminal_safe(p)))
                item.addChild(child)

        def failed(error: DeskdexError) -> None:
            # an older daemon without the op still tells how many copies there are
            child = QTreeWidgetItem([f"{copies_text(int(hit.get('duplicates') or 0))} (paths unavailable: {error})"])
            child.setData(0, HTML_ROLE, html.escape(child.text(0)))
            item.addChild(child)

        self.caller.request("duplicates", show, failed, uri=hit["uri"])

    # -- opening
    def current_path(self) -> str | None:
        item = self.results.currentItem() or self.results.topLevelItem(0)
        return item.data(0, PATH_ROLE) if item is not None else None

    def open_item(self, item: QTreeWidgetItem | None = None, folder: bool = False) -> None:
        path = item.data(0, PATH_ROLE) if item is not None else self.current_path()
        if path:
            self.opener(os.path.dirname(path) if folder else path)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.KeyPress or not isinstance(event, QKeyEvent):
            return False
        key, mods = event.key(), event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.open_item(folder=bool(mods & Qt.KeyboardModifier.ControlModifier))
            return True
        if key == Qt.Key.Key_Escape:
            self.hide()
            return True
        if obj is self.box and key == Qt.Key.Key_Down and self.results.topLevelItemCount():
            self.results.setFocus()
            return True
        return False

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.box.setFocus()
        self.box.selectAll()


class HtmlDelegate(QStyledItemDelegate):
    """Paints an item's HTML_ROLE (bold title, grey path and date, snippet with matches in bold)."""

    # muted colours only on an unselected row: on the selection colour they would be unreadable
    PLAIN = ".path { color: #666666 } .copies { color: #2a62b8 }"

    def _doc(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(option.font)
        if not option.state & QStyle.StateFlag.State_Selected:
            doc.setDefaultStyleSheet(self.PLAIN)
        doc.setHtml(index.data(HTML_ROLE) or html.escape(index.data() or ""))
        doc.setTextWidth(max(100, option.rect.width()))
        return doc

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        doc = self._doc(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        ctx = QAbstractTextDocumentLayout.PaintContext()
        if opt.state & QStyle.StateFlag.State_Selected:
            ctx.palette.setColor(QPalette.ColorRole.Text, opt.palette.color(QPalette.ColorRole.HighlightedText))
        painter.save()
        painter.translate(opt.rect.topLeft())
        painter.setClipRect(opt.rect.translated(-opt.rect.topLeft()))
        doc.documentLayout().draw(painter, ctx)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        view = self.parent()  # the results tree (an item view) that this delegate paints
        if opt.rect.width() <= 0 and isinstance(view, QAbstractItemView):
            opt.rect.setWidth(view.viewport().width() - 40)
        doc = self._doc(opt, index)
        return QSize(int(doc.idealWidth()), int(doc.size().height()) + 4)
