"""The search window's filters: the search's matches counted by type, folder, year and language (the
search op's ``facets``, index/facets.py), each value with its count; checking one narrows the search
to it (its ``filter``, query-language text, is added to the query), checking another of the same
kind replaces it, unchecking it widens the search again.

The counts are asked for in a second search after the hits are shown, as the web page does: counting
up to 1,000 matches costs about as much as the search itself, and the hits should not wait for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

if TYPE_CHECKING:
    from deskdex.protocol import Facets

KINDS = (("type", "Type"), ("folder", "Folder"), ("year", "Date"), ("lang", "Language"))
FILTER_ROLE = Qt.ItemDataRole.UserRole + 1  # a value's filter; "" on a kind's heading
KIND_ROLE = Qt.ItemDataRole.UserRole + 2


class Filters(QTreeWidget):
    """The facets of the last search, with the chosen filters checked; ``changed`` runs when the
    user checks or unchecks one."""

    def __init__(self, changed: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.changed = changed
        self.setHeaderHidden(True)
        self.setRootIsDecorated(False)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a folder's last parts tell it apart
        self.chosen: dict[str, tuple[str, str]] = {}  # kind -> (value, filter)
        self._filling = False
        self.itemChanged.connect(self._toggled)

    def filters(self) -> list[str]:
        return [f for _, f in self.chosen.values()]

    def forget(self) -> None:
        """No filter chosen, nothing listed (a new query typed)."""
        self.chosen.clear()
        self.show_facets(None)

    def show_facets(self, facets: Facets | dict[str, Any] | None) -> None:
        """List ``facets`` (None: none yet), the chosen values checked, each with its count."""
        self._filling = True
        try:
            self.clear()
            for kind, heading in KINDS:
                listed: list[Any] = (facets or {}).get(kind) or []  # type: ignore[assignment]  # a Facets member
                values = list(listed)
                chosen = self.chosen.get(kind)
                if chosen and not any(v["filter"] == chosen[1] for v in values):
                    values.insert(0, {"value": chosen[0], "count": None, "filter": chosen[1]})
                if not values:
                    continue
                top = QTreeWidgetItem([heading])
                top.setData(0, FILTER_ROLE, "")
                top.setData(0, KIND_ROLE, kind)
                top.setFlags(Qt.ItemFlag.ItemIsEnabled)
                font = top.font(0)
                font.setBold(True)
                top.setFont(0, font)
                self.addTopLevelItem(top)
                for v in values:
                    count = "" if v["count"] is None else f" ({v['count']:,})"
                    item = QTreeWidgetItem([f"{v['value']}{count}"])
                    item.setData(0, FILTER_ROLE, v["filter"])
                    item.setData(0, KIND_ROLE, kind)
                    item.setToolTip(0, v["filter"])
                    item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
                    item.setCheckState(0, Qt.CheckState.Checked if chosen and chosen[1] == v["filter"]
                                       else Qt.CheckState.Unchecked)
                    top.addChild(item)
                top.setExpanded(True)
        finally:
            self._filling = False

    def items(self) -> list[QTreeWidgetItem]:
        """Every value listed (not the headings)."""
        out = []
        for i in range(self.topLevelItemCount()):
            top = self.topLevelItem(i)
            if top is not None:
                out += [c for j in range(top.childCount()) if (c := top.child(j)) is not None]
        return out

    def _toggled(self, item: QTreeWidgetItem, _column: int) -> None:
        if self._filling:
            return
        kind, flt = str(item.data(0, KIND_ROLE)), str(item.data(0, FILTER_ROLE))
        if not flt:
            return
        if item.checkState(0) == Qt.CheckState.Checked:
            self.chosen[kind] = (item.text(0).rsplit(" (", 1)[0], flt)
        elif self.chosen.get(kind, ("", ""))[1] == flt:
            del self.chosen[kind]
        self.changed()
