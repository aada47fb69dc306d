"""The search window: a box that searches as you type, results with their type's icon, title, path, date,
page and a snippet with the matched words in bold, the number of copies it stands for and of similar
documents, expandable to their paths ("Show N similar" in the context menu lists them as results).
Beside them: the filters with their counts (filters.py), and the selected result's text with every hit
highlighted (preview.py). The results sort by relevance, date or size; the queries settled on are
kept (history.py) and offered by the box's completer and the History button.

The count above the results counts what is listed: "2 results (+2 copies)" for two rows standing for
four matching files, never "4 results" above two rows; while more are to come, "first 50 results of
60 matching documents", the copies among them included.

As you type, the word at the end also matches as a prefix (``zep`` finds ``zephyr``: index/as_you_type.py).
After the documents holding the words come those related by meaning, marked so ("Words only" leaves them
out; docs/search.md, "Meaning").
The first ``LIMIT`` results show, and "More results" adds the next ``LIMIT`` each time. A result's context
menu opens it, opens its folder or copies its path. With no daemon, searches read the index directly
(offline.py) and the window says so.

Keys: Enter opens the selected result (the first if none is), Ctrl+Enter opens its folder, Down moves from
the box to the results, F3 and Shift+F3 move to the preview's next and previous hit, Escape hides the
window."""

from __future__ import annotations

import html
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import (QEvent, QModelIndex, QObject, QPersistentModelIndex, QPoint, QSize, QStringListModel, Qt,
                            QTimer, QUrl)
from PySide6.QtGui import (QAbstractTextDocumentLayout, QDesktopServices, QKeyEvent, QPainter, QPalette,
                           QShowEvent, QTextDocument)
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QComboBox, QCompleter, QHBoxLayout, QLabel,
                               QLineEdit, QMenu, QPushButton, QSplitter, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from deskdex.errors import DeskdexError
from deskdex.index import narrowed, prefix_last_word
from deskdex.protocol import SORTS

from ..render import cluster_counts, count_line, terminal_safe
from .caller import Caller
from .filters import Filters
from .history import History
from .icons import type_icon
from .offline import FROM_INDEX
from .preview import Preview
from .viewers import open_at_page

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
SETTLE_MS = 1500  # a query whose results have shown this long without a key typed goes into the history
RELATED_BADGE = "related by meaning"  # on a hit holding none of the words typed (docs/search.md, "Meaning")
SORT_NAMES = {"relevance": "Relevance", "date": "Date, newest first", "size": "Size, largest first"}


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
                 parent: QWidget | None = None, history: History | None = None) -> None:
        super().__init__(parent)
        self.caller, self.opener = caller, opener
        self.history = history if history is not None else History(None)
        self.setWindowTitle("deskdex search")
        self.resize(1100, 620)
        self.box = QLineEdit(placeholderText="Search… (words, \"phrases\", title:, ext:, after:…)")
        self.box.setClearButtonEnabled(True)
        self.history_model = QStringListModel(self.history.queries, self)
        completer = QCompleter(self.history_model, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.box.setCompleter(completer)
        self.sort = QComboBox()
        for key in SORTS:
            self.sort.addItem(SORT_NAMES.get(key, key), key)
        self.sort.setToolTip("Order of the results")
        self.words_only = QToolButton()
        self.words_only.setText("Words only")
        self.words_only.setCheckable(True)
        self.words_only.setToolTip("Only documents holding the words typed: not also those related by meaning")
        self.history_button = QToolButton()
        self.history_button.setText("History")
        self.history_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.history_menu = QMenu(self)
        self.history_menu.aboutToShow.connect(self._fill_history_menu)
        self.history_button.setMenu(self.history_menu)
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
        self.filters = Filters(self._filters_changed)
        self.preview = Preview(caller, self.open_page)
        top = QHBoxLayout()
        top.addWidget(self.box, 1)
        top.addWidget(self.sort)
        top.addWidget(self.words_only)
        top.addWidget(self.history_button)
        listing = QWidget()
        column = QVBoxLayout(listing)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.results, 1)
        column.addWidget(self.more_button)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        for w in (self.filters, listing, self.preview):
            self.splitter.addWidget(w)
        self.splitter.setSizes([220, 440, 440])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.info)
        layout.addWidget(self.splitter, 1)
        self.timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self.timer.timeout.connect(self.search_now)
        self.box.textChanged.connect(lambda _: self.timer.start())
        self.settle = QTimer(self, singleShot=True, interval=SETTLE_MS)
        self.settle.timeout.connect(self.remember)
        self.box.textEdited.connect(lambda _: self.settle.stop())
        self.sort.currentIndexChanged.connect(lambda _: self.search_now())
        self.words_only.toggled.connect(lambda _: self.search_now())
        self.results.currentItemChanged.connect(lambda item, _old: self._preview(item))
        self.results.itemActivated.connect(lambda item, _col: self.open_item(item))
        self.results.itemExpanded.connect(self._expand)
        self.results.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.results.customContextMenuRequested.connect(self._context_menu_at)
        self.box.installEventFilter(self)
        self.results.installEventFilter(self)
        self._seq = 0  # number of the newest search: answers to older ones arriving late are dropped
        self._query = ""  # what the newest search sent (the box's text, its last word a prefix too, and filters)
        self._words = ""  # the box's part of it: what the preview marks
        self._similar: str | None = None  # the hit whose similar documents are listed ("Show N similar")

    # -- searching
    def search_now(self) -> None:
        self._seq += 1
        text = self.box.text()
        if not text.strip():
            self.results.clear()
            self.more_button.hide()
            self.info.setText(" ")
            self.filters.forget()
            self.preview.show_hit(None, "")
            return
        # the text as typed: a space at its end says the last word is finished
        self._words = prefix_last_word(text.lstrip()).strip()
        self._query = narrowed(self._words, self.filters.filters())
        self._similar = None
        self._request(0)

    def sort_key(self) -> str:
        return str(self.sort.currentData() or "relevance")

    def _filters_changed(self) -> None:
        self.search_now()

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
                            query=self._query, limit=LIMIT + 1, offset=offset, sort=self.sort_key(),
                            words=self.words_only.isChecked(),
                            **({"similar": self._similar} if self._similar is not None else {}))

    def _request_facets(self) -> None:
        seq = self._seq

        def show(result: dict[str, Any]) -> None:
            if seq == self._seq:
                self.filters.show_facets(result.get("facets"))

        # after the hits (as the web page): counting up to 1,000 matches costs about a search
        self.caller.request("search", show, lambda e: None, query=self._query, limit=1, snippets=False,
                            facets=True, sort=self.sort_key())

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
        # listing a cluster ("Show N similar"), every copy is a row of its own: none is folded away
        copies = sum(int(h.get("duplicates") or 0) for h in self.hits()) if self._similar is None else 0
        related = sum(1 for h in self.hits() if h.get("related"))
        self.info.setText(count_line(shown, copies, total, more, result.get("indexing"), related,
                                     int(result.get("related", 0)))
                          + (f" ({NO_DAEMON})" if result.get(FROM_INDEX) else ""))
        self.more_button.setVisible(more)
        self.more_button.setEnabled(True)
        if offset == 0:
            if hits and (first := self.results.topLevelItem(0)) is not None:
                self.results.setCurrentItem(first)
            else:
                self.preview.show_hit(None, "")
            if self._similar is None:
                self._request_facets()
            if hits and self.box.text().strip():
                self.settle.start()

    def hits(self) -> list[SearchHit]:
        """The hits listed, in order."""
        out = []
        for i in range(self.results.topLevelItemCount()):
            item = self.results.topLevelItem(i)
            if item is not None:
                out.append(item.data(0, HIT_ROLE))
        return out

    def _failed(self, seq: int, error: DeskdexError, offset: int = 0) -> None:
        if seq != self._seq:
            return
        if offset == 0:
            self.results.clear()
            self.more_button.hide()
            self.preview.show_hit(None, "")
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
        page = f"page {hit['page']}" if hit.get("page") else ""
        related = RELATED_BADGE if hit.get("related") else ""
        plain = [terminal_safe(hit.get("title") or os.path.basename(path)), shown, date, page, counts, related]
        badge = f" <span class='copies'>[{counts}]</span>" if counts else ""
        if related:  # found by meaning alone: none of the words typed is in it
            badge += f" <span class='related'>[{related}]</span>"
        where = " · ".join(html.escape(p) for p in (shown, date, page) if p)
        item = new_item(" — ".join(p for p in plain if p),
                        f"<b>{html.escape(plain[0])}</b>{badge}<br><span class='path'>{where}</span><br>"
                        f"{snippet_html(hit.get('snippet', ''), hit.get('highlights'))}",
                        path, hit)
        item.setIcon(0, type_icon(hit.get("mime") or ""))
        item.setToolTip(0, as_rich_text(shown + (f"\n{hit['mime']}" if hit.get("mime") else "")))
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
            self.remember()
            self.opener(os.path.dirname(path) if folder else path)

    def open_page(self, path: str, mime: str, page: int) -> None:
        """Open ``path`` at ``page`` where its viewer takes a page (viewers.py), else as ``opener`` does."""
        self.remember()
        open_at_page(path, mime, page, self.opener)

    # -- the preview
    def _preview(self, item: QTreeWidgetItem | None) -> None:
        # a copy's line (a child) names a path, not a hit the document op knows by its uri
        hit = item.data(0, HIT_ROLE) if item is not None and item.parent() is None else None
        self.preview.show_hit(hit or None, self._words)

    # -- history
    def remember(self) -> None:
        """Keep the box's query in the history (the user settled on it)."""
        self.settle.stop()
        if self.history.add(self.box.text()):
            self.history_model.setStringList(self.history.queries)

    def _fill_history_menu(self) -> None:
        self.history_menu.clear()
        for q in self.history.queries[:20]:
            # the text as a label: an & in a query would be read as a shortcut's mark
            self.history_menu.addAction(q.replace("&", "&&"), self._history_choice(q))
        if not self.history.queries:
            self.history_menu.addAction("No searches yet").setEnabled(False)
        else:
            self.history_menu.addSeparator()
            self.history_menu.addAction("Clear history", self._clear_history)

    def _history_choice(self, query: str) -> Callable[[], None]:
        return lambda: self.box.setText(query)

    def _clear_history(self) -> None:
        self.history.clear()
        self.history_model.setStringList([])

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
        hit = item.data(0, HIT_ROLE)
        if hit and hit.get("page") and os.path.isabs(path) and "#" not in hit["uri"]:  # not an archive's member
            menu.addAction(f"Open at page {hit['page']}", lambda: self.open_page(path, hit.get("mime") or "",
                                                                                 int(hit["page"])))
        menu.addAction("Copy path", lambda: copy_path(path))
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
        if key == Qt.Key.Key_F3:  # as in a viewer's find: the next hit, with Shift the previous
            (self.preview.previous_hit if mods & Qt.KeyboardModifier.ShiftModifier else self.preview.next_hit)()
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
    PLAIN = ".path { color: #666666 } .copies { color: #2a62b8 } .related { color: #8a5a00 }"

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
        opt.text = ""
        style = self.view.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, self.view)  # with the type's icon
        area = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, self.view)
        opt.rect = area
        doc = self._doc(opt, index)
        ctx = QAbstractTextDocumentLayout.PaintContext()
        if opt.state & QStyle.StateFlag.State_Selected:
            ctx.palette.setColor(QPalette.ColorRole.Text, opt.palette.color(QPalette.ColorRole.HighlightedText))
        painter.save()
        painter.translate(area.topLeft())
        painter.setClipRect(area.translated(-area.topLeft()))
        doc.documentLayout().draw(painter, ctx)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        if opt.rect.width() <= 0:
            opt.rect.setWidth(self.view.viewport().width() - 40)
        if not opt.icon.isNull():  # the text beside the icon is narrower
            opt.rect.setWidth(opt.rect.width() - opt.decorationSize.width() - 8)
        doc = self._doc(opt, index)
        return QSize(int(doc.idealWidth()), int(doc.size().height()) + 4)
