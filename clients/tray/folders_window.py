"""The watched-folders window: the folders with their document and failure counts, Add folder… (a folder
picker), Remove, and the exclusion patterns (gitignore syntax) with their own add and remove."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QGroupBox, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QListWidget, QMessageBox, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from deskdex.errors import DeskdexError

from .caller import Caller

logger = logging.getLogger(__name__)


def ask_remove(parent: QWidget, path: str) -> bool:
    answer = QMessageBox.question(parent, "Stop watching?",
                                  f"Stop watching {path}?\nIts documents leave the index.")
    return answer == QMessageBox.StandardButton.Yes


class FoldersWindow(QWidget):
    """``confirm(parent, path)`` asks before a folder is removed; ``native_dialog=False`` gives Qt's own
    folder picker (the one tests drive, and the one that works without a desktop portal)."""

    def __init__(self, caller: Caller, confirm: Callable[[QWidget, str], bool] = ask_remove,
                 native_dialog: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.caller, self.confirm, self.native_dialog = caller, confirm, native_dialog
        self.dialog: QFileDialog | None = None
        self.setWindowTitle("deskdex: watched folders")
        self.resize(640, 480)

        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["Folder", "Documents", "Failed"])
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.add_button = QPushButton("Add folder…")
        self.remove_button = QPushButton("Remove")
        self.add_button.clicked.connect(self.pick_folder)
        self.remove_button.clicked.connect(self.remove_selected)

        self.patterns = QListWidget()
        self.pattern_edit = QLineEdit(placeholderText="a pattern, e.g. *.tmp or node_modules/")
        self.add_pattern_button = QPushButton("Add")
        self.remove_pattern_button = QPushButton("Remove")
        self.pattern_edit.returnPressed.connect(self.add_pattern)
        self.add_pattern_button.clicked.connect(self.add_pattern)
        self.remove_pattern_button.clicked.connect(self.remove_pattern)
        self.info = QLabel(" ")

        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch()
        pattern_row = QHBoxLayout()
        for w in (self.pattern_edit, self.add_pattern_button, self.remove_pattern_button):
            pattern_row.addWidget(w)
        excl = QGroupBox("Exclusions (never indexed)")
        excl_layout = QVBoxLayout(excl)
        excl_layout.addWidget(self.patterns)
        excl_layout.addLayout(pattern_row)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addLayout(buttons)
        layout.addWidget(excl)
        layout.addWidget(self.info)

    def refresh(self) -> None:
        self.caller.request("watch_list", self._show_folders, self._failed)
        self.caller.request("exclude_list", self._show_patterns, self._failed)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self.refresh()

    # -- folders
    def pick_folder(self) -> None:
        """Open the folder picker without blocking; the chosen folder is added when the user accepts."""
        # At home, where people keep what they want indexed; without a directory Qt starts in the
        # process's current folder, which for a tray started at login is wherever that happened to be.
        dlg = QFileDialog(self, "Watch a folder", str(Path.home()))
        dlg.setFileMode(QFileDialog.FileMode.Directory)
        dlg.setOption(QFileDialog.Option.ShowDirsOnly)
        dlg.setOption(QFileDialog.Option.DontUseNativeDialog, not self.native_dialog)
        dlg.fileSelected.connect(self.add_folder)
        dlg.finished.connect(lambda _: setattr(self, "dialog", None))
        self.dialog = dlg
        dlg.open()

    def add_folder(self, path: str) -> None:
        if path:
            self.caller.request("watch_add", self._show_folders, self._failed, path=path)

    def remove_selected(self) -> None:
        # Rows are asked before cells: a cell that is not there comes back as None, and reading a None
        # from Qt loses a reference to it on some bindings (search_window.HIT_ROLE).
        row = self.table.currentRow()
        cell = self.table.item(row, 0) if 0 <= row < self.table.rowCount() else None
        if cell is None:
            return
        path = cell.text()
        if self.confirm(self, path):
            self.caller.request("watch_remove", self._show_folders, self._failed, path=path)

    def _show_folders(self, result: dict[str, Any]) -> None:
        folders = result.get("folders", [])
        self.table.setRowCount(len(folders))
        for row, f in enumerate(folders):
            failed = int(f.get("failed") or 0)
            cells = [QTableWidgetItem(str(f["path"])), QTableWidgetItem(f"{int(f.get('documents') or 0):,}"),
                     QTableWidgetItem(f"{failed:,}")]
            for c in cells[1:]:
                c.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if failed:
                cells[2].setForeground(QColor("#c62828"))
                cells[2].setToolTip("files that could not be converted: `deskdex status --failures` lists them")
            for col, c in enumerate(cells):
                self.table.setItem(row, col, c)
        self.info.setText(f"{len(folders)} folder{'s' if len(folders) != 1 else ''} watched")

    # -- exclusions
    def add_pattern(self) -> None:
        pattern = self.pattern_edit.text().strip()
        if pattern:
            self.caller.request("exclude_add", self._show_patterns, self._failed, pattern=pattern)
            self.pattern_edit.clear()

    def remove_pattern(self) -> None:
        row = self.patterns.currentRow()  # asked first, as in remove_selected
        item = self.patterns.item(row) if 0 <= row < self.patterns.count() else None
        if item is not None:
            self.caller.request("exclude_remove", self._show_patterns, self._failed, pattern=item.text())

    def _show_patterns(self, result: dict[str, Any]) -> None:
        self.patterns.clear()
        self.patterns.addItems([str(p) for p in result.get("exclude", [])])

    def _failed(self, error: DeskdexError) -> None:
        self.info.setText(f"<span style='color:#c62828'>{html.escape(str(error))}</span>")
