"""The search window: a box that searches as you type, results with title, path, date and a snippet with
the matched words in bold, the number of copies it stands for and of similar documents, expandable to
their paths ("Show N similar" in the context menu lists them as results).

As you type, the word at the end also matches as a prefix (``zep`` finds ``zephyr``: index/as_you_type.py).
The first ``LIMIT`` results show, and "More results" adds the next ``LIMIT`` each time. A result's context
menu opens it, opens its folder or copies its path. With no daemon, searches read the index directly
(offline.py) and the window says so.

Keys: Enter opens the selected result (the first if none is), Ctrl+Enter opens its folder, Down moves from
the box to the results, Escape hides the window."""

from __future__ import annotations

import html
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QPoint, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import (QAbstractTextDocumentLayout, QDesktopServices, QKeyEvent, QPainter, QPalette,
                           QShowEvent, QTextDocument)
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QLabel, QLineEdit, QMenu, QPushButton, QStyle,
                               QStyledItemDelegate, QStyleOptionViewItem, QTreeWidget, QTreeWidgetItem, QVBoxLayout,
                               QWidget)

from deskdex.errors import DeskdexError
from deskdex.index import prefix_last_word

from ..render import cluster_counts, terminal_safe
from .caller import Caller
from .offline import FROM_INDEX

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit

logger = logging.getLogger(__name__)

DEBOUNCE_MS = 200  # long enough to skip the keystrokes of a word typed fast, short enough to feel instant
LIMIT = 50  # results a search shows at first, and "More results" adds each time
NO_DAEMON = "no daemon is running: read from the index directly"
# Every item sets all three roles (new_item): reading a role never set, like reading
# QStyleOptionViewItem.widget where it is None, hands Python a None, and PySide6-Essentials 6.12.0
# on Python 3.11 loses a reference to None each time, until the interpreter aborts (binding.py).
HIT_ROLE = Qt.ItemDataRole.UserRole + 1   # the hit as the daemon sent it (top-level items); {} on the others
HTML_ROLE = Qt.ItemDataRole.UserRole + 2  # what the delegate paints
PATH_ROLE = Qt.ItemDataRole.UserRole + 3  # the file Enter opens (copies too); "" on a line that names none


def open_path(path: str) -> None:
    """Open a file or folder with the desktop's default application."""
    if not QDesktopServices.openUrl(QUrl.fromLocalFile(path)):
        logger.warning("no application opened %s", path)


def copy_path(path: str) -> None:
    """Put ``path`` on the clipboard (and, on X11, the selection that a middle click pastes)."""
    clipboard = QApplication.clipboard()
    clipboard.setText(path)
    if clipboard.supportsSelection():
        clipboard.setText(path, clipboard.Mode.Selection)


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


def new_item(text: str, html_text: str, path: str = "", hit: SearchHit | None = None) -> QTreeWidgetItem:
    """A result line with each role the window reads set: ``text`` (what accessibility and tests read),
    ``html_text`` (what is painted), the ``path`` it opens and the ``hit`` it stands for."""
    item = QTreeWidgetItem([text])
    item.setData(0, HTML_ROLE, html_text)
    item.setData(0, PATH_ROLE, path)
    item.setData(0, HIT_ROLE, hit if hit is not None else {})
    return item


def as_rich_text(text: str) -> str:
    """``text`` for a tooltip, which Qt reads as HTML when it guesses it is (a name with "<b>" in
    it): always HTML, escaped, so it shows as written."""
    return f"<p style='white-space:pre'>{html.escape(text)}</p>"


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
        self.more_button = QPushButton("More results")
        self.more_button.hide()
        self.more_button.clicked.connect(self.more)
        self.menu: QMenu | None = None  # the context menu last shown
        self.results = QTreeWidget()
        self.results.setHeaderHidden(True)
        self.results.setItemDelegate(HtmlDelegate(self.results))
        self.results.setUniformRowHeights(False)
        self.results.setRootIsDecorated(True)
        layout = QVBoxLayout(self)
        for w in (self.box, self.info, self.results, self.more_button):
            layout.addWidget(w)
        self.timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self.timer.timeout.connect(self.search_now)
        self.box.textChanged.connect(lambda _: self.timer.start())
        self.results.itemActivated.connect(lambda item, _col: self.open_item(item))
        self.results.itemExpanded.connect(self._expand)
        self.results.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.results.customContextMenuRequested.connect(self._context_menu_at)
        self.box.installEventFilter(self)
        self.results.installEventFilter(self)
        self._seq = 0  # number of the newest search: answers to older ones arriving late are dropped
        self._query = ""  # what the newest search sent (the box's text, its last word a prefix too)
        self._similar: str | None = None  # the hit whose similar documents are listed ("Show N similar")

    # -- searching
    def search_now(self) -> None:
        self._seq += 1
        text = self.box.text()
        if not text.strip():
            self.results.clear()
            self.more_button.hide()
            self.info.setText(" ")
            return
        # the text as typed: a space at its end says the last word is finished
        self._query = prefix_last_word(text.lstrip()).strip()
        self._similar = None
        self._request(0)

    def show_similar(self, hit: SearchHit) -> None:
        """List every document of ``hit``'s cluster (its copies and similar documents), ranked by
        the words typed; typing again goes back to the search."""
        self._seq += 1
        self._similar = hit["uri"]
        self._request(0)

    def more(self) -> None:
        """The next ``LIMIT`` results of the search shown, after those already listed."""
        self.more_button.setEnabled(False)
        self._request(self.results.topLevelItemCount())

    def _request(self, offset: int) -> None:
        # one more than is shown: whether there are more to page to, without counting them
        seq = self._seq
        self.caller.request("search", lambda r: self._show(seq, offset, r), lambda e: self._failed(seq, e, offset),
                            query=self._query, limit=LIMIT + 1, offset=offset,
                            **({"similar": self._similar} if self._similar is not None else {}))

    def _show(self, seq: int, offset: int, result: dict[str, Any]) -> None:
        if seq != self._seq:  # an answer to a query typed over since
            return
        if offset == 0:
            self.results.clear()
        elif offset != self.results.topLevelItemCount():  # a page already added
            return
        hits: list[SearchHit] = result.get("hits", [])  # the search op's answer
        more = len(hits) > LIMIT
        for hit in hits[:LIMIT]:
            self.results.addTopLevelItem(self._item(hit))
        shown = self.results.topLevelItemCount()
        total = int(result.get("total", shown))
        self.info.setText(f"{total} result{'s' if total != 1 else ''}" + (f", first {shown} shown" if more else "")
                          + (f" ({NO_DAEMON})" if result.get(FROM_INDEX) else ""))
        self.more_button.setVisible(more)
        self.more_button.setEnabled(True)
        if offset == 0 and hits and (first := self.results.topLevelItem(0)) is not None:
            self.results.setCurrentItem(first)

    def _failed(self, seq: int, error: DeskdexError, offset: int = 0) -> None:
        if seq != self._seq:
            return
        if offset == 0:
            self.results.clear()
            self.more_button.hide()
        else:  # the results listed stay; the button tries again
            self.more_button.setEnabled(True)
        self.info.setText(f"<span style='color:#c62828'>{html.escape(str(error))}</span>")

    def _item(self, hit: SearchHit) -> QTreeWidgetItem:
        path = hit.get("path") or hit.get("uri", "")
        # A bidi override or a control character written out: no name passes for another.
        shown = terminal_safe(path)
        date = time.strftime("%Y-%m-%d", time.localtime(hit["mtime"])) if hit.get("mtime") else ""
        dups, similar = int(hit.get("duplicates") or 0), int(hit.get("similar") or 0)
        counts = cluster_counts(dups, similar)
        plain = [terminal_safe(hit.get("title") or os.path.basename(path)), shown, date, counts]
        badge = f" <span class='copies'>[{counts}]</span>" if counts else ""
        item = new_item(" — ".join(p for p in plain if p),
                        f"<b>{html.escape(plain[0])}</b>{badge}<br><span class='path'>{html.escape(shown)}"
                        f" · {date}</span><br>{snippet_html(hit.get('snippet', ''), hit.get('highlights'))}",
                        path, hit)
        item.setToolTip(0, as_rich_text(shown))
        if dups or similar:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
        return item

    # -- copies, asked for on first expansion
    def _expand(self, item: QTreeWidgetItem) -> None:
        hit = item.data(0, HIT_ROLE)
        if not hit or item.childCount():
            return

        def show(result: dict[str, Any]) -> None:
            for p in result.get("paths", []):
                item.addChild(new_item(terminal_safe(p), html.escape(terminal_safe(p)), p))

        def failed(error: DeskdexError) -> None:
            # an older daemon without the op still tells how many copies there are
            counts = cluster_counts(int(hit.get("duplicates") or 0), int(hit.get("similar") or 0))
            line = f"{counts} (paths unavailable: {error})"
            item.addChild(new_item(line, html.escape(line)))

        self.caller.request("duplicates", show, failed, uri=hit["uri"])

    # -- opening
    def current_path(self) -> str | None:
        # asked before the items are: an item that is not there comes back as None (see HIT_ROLE)
        if not self.results.topLevelItemCount():
            return None
        item = self.results.currentItem() if self.results.currentIndex().isValid() else self.results.topLevelItem(0)
        if item is None:  # for the type checker: there is an item
            return None
        return str(item.data(0, PATH_ROLE)) or None

    def open_item(self, item: QTreeWidgetItem | None = None, folder: bool = False) -> None:
        path = item.data(0, PATH_ROLE) if item is not None else self.current_path()
        if path:
            self.opener(os.path.dirname(path) if folder else path)

    # -- the context menu of a result
    def context_menu(self, item: QTreeWidgetItem) -> QMenu | None:
        """Open, Open containing folder, Copy path and, for a hit with similar documents, Show N similar
        for ``item``; None for a line that names no file."""
        path = item.data(0, PATH_ROLE)
        if not path:
            return None
        menu = QMenu(self)
        menu.addAction("Open", lambda: self.open_item(item))
        folder = menu.addAction("Open containing folder", lambda: self.open_item(item, folder=True))
        folder.setEnabled(os.path.isabs(path))  # a web page's URL has no folder to open
        menu.addAction("Copy path", lambda: copy_path(path))
        hit = item.data(0, HIT_ROLE)
        similar = int(hit.get("similar") or 0) if hit else 0
        if similar:
            menu.addAction(f"Show {similar} similar", lambda: self.show_similar(hit))
        return menu

    def _context_menu_at(self, pos: QPoint) -> None:
        if not self.results.indexAt(pos).isValid():  # no line there: itemAt would give None (see HIT_ROLE)
            return
        item = self.results.itemAt(pos)
        if item is None:  # for the type checker: there is a line there
            return
        self.results.setCurrentItem(item)
        if self.menu is not None:
            self.menu.deleteLater()
        self.menu = self.context_menu(item)
        if self.menu is not None:
            self.menu.popup(self.results.viewport().mapToGlobal(pos))  # not exec(): nothing waits on it

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

    def __init__(self, view: QAbstractItemView) -> None:
        super().__init__(view)
        # The view it paints, kept here: handed to the style instead of option.widget, which is None at
        # times, and reading a None from Qt loses a reference on some bindings (see HIT_ROLE).
        self.view = view

    def _doc(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(option.font)
        if not option.state & QStyle.StateFlag.State_Selected:
            doc.setDefaultStyleSheet(self.PLAIN)
        doc.setHtml(index.data(HTML_ROLE))  # set on every item (new_item)
        doc.setTextWidth(max(100, option.rect.width()))
        return doc

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        doc = self._doc(opt, index)
        opt.text = ""
        self.view.style().drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, self.view)
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
        if opt.rect.width() <= 0:
            opt.rect.setWidth(self.view.viewport().width() - 40)
        doc = self._doc(opt, index)
        return QSize(int(doc.idealWidth()), int(doc.size().height()) + 4)
