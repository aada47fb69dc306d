"""The tray icon, drawn at runtime with QPainter (no image files to ship): a magnifying glass whose colour
and badge say the daemon's state, with a progress arc while indexing. And the icons of the results'
types, from the desktop's icon theme."""

from __future__ import annotations

import logging

from PySide6.QtCore import QMimeDatabase, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QApplication, QStyle

logger = logging.getLogger(__name__)

COLORS = {
    "idle": QColor("#3b7d3b"),
    "indexing": QColor("#2a62b8"),
    "scanning": QColor("#2a62b8"),
    "paused": QColor("#b8860b"),
    "error": QColor("#c62828"),
}
SIZES = (16, 22, 32, 48, 64)


def draw(state: str, progress: float | None = None, size: int = 64) -> QPixmap:
    """One pixmap of ``size`` pixels for ``state``; ``progress`` (0..1) draws an arc around the lens."""
    color = COLORS.get(state, COLORS["error"])
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = size / 64.0
    lens = QRectF(6 * s, 6 * s, 36 * s, 36 * s)
    # the handle first, so the lens covers its end
    p.setPen(QPen(color, 9 * s, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    p.drawLine(QPointF(38 * s, 38 * s), QPointF(56 * s, 56 * s))
    p.setBrush(QColor(255, 255, 255, 230))
    p.setPen(QPen(color, 6 * s))
    p.drawEllipse(lens)
    if state in ("indexing", "scanning") and progress is not None:
        # Qt angles are in 1/16 degree, counter-clockwise from 3 o'clock: start at 12 and go clockwise
        p.setPen(QPen(color.darker(150), 6 * s, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap))
        p.drawArc(lens.adjusted(9 * s, 9 * s, -9 * s, -9 * s), 90 * 16,
                  -int(360 * 16 * max(0.0, min(1.0, progress))))
    elif state == "paused":
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(color)
        p.drawRect(QRectF(16 * s, 14 * s, 6 * s, 20 * s))
        p.drawRect(QRectF(26 * s, 14 * s, 6 * s, 20 * s))
    elif state == "error":
        p.setPen(QPen(color, 6 * s, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
        p.drawLine(QPointF(24 * s, 14 * s), QPointF(24 * s, 26 * s))
        p.drawPoint(QPointF(24 * s, 34 * s))
    p.end()
    return pm


def icon(state: str, progress: float | None = None) -> QIcon:
    """The icon at the sizes trays ask for (16 to 64 pixels), each drawn, not scaled."""
    ic = QIcon()
    for size in SIZES:
        ic.addPixmap(draw(state, progress, size))
    return ic


_type_icons: dict[str, QIcon] = {}
# Themes with MIME type icons, tried where the desktop names no theme (a bare X session, a window
# manager without a settings daemon): Qt then knows only hicolor, which has none.
FALLBACK_THEMES = ("Adwaita", "breeze", "oxygen", "gnome")


def _fallback_theme() -> None:
    if QIcon.themeName() not in ("", "hicolor") or QIcon.fallbackThemeName() not in ("", "hicolor"):
        return
    import os

    for theme in FALLBACK_THEMES:
        if any(os.path.isdir(os.path.join(d, theme)) for d in QIcon.themeSearchPaths()):
            QIcon.setFallbackThemeName(theme)
            return


def type_icon(mime: str) -> QIcon:
    """The icon of a MIME type in the desktop's icon theme: its own freedesktop name
    (``application-pdf``), else the name the shared MIME database gives (``x-office-document``), else
    its generic one (``text-x-generic``), else the style's file icon where the theme has none of them."""
    cached = _type_icons.get(mime)
    if cached is not None:
        return cached
    if not _type_icons:
        _fallback_theme()
    names = [mime.replace("/", "-")] if mime else []
    known = QMimeDatabase().mimeTypeForName(mime) if mime else None
    if known is not None and known.isValid():
        names += [known.iconName(), known.genericIconName()]
    found = next((QIcon.fromTheme(n) for n in dict.fromkeys(names) if n and QIcon.hasThemeIcon(n)), None)
    style = QApplication.style()
    ic = found if found is not None else style.standardIcon(QStyle.StandardPixmap.SP_FileIcon)
    _type_icons[mime] = ic
    return ic
