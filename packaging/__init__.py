"""Files deskdex installs for other programs, read with ``importlib.resources`` (never by a path built
from ``__file__``), so they work from a wheel, an editable install and a zip alike:

    systemd/deskdex.service           the systemd user unit (``deskdex service install``)
    launchd/org.deskdex.daemon.plist  the launchd agent (macOS)
    windows/deskdex-task.xml          the scheduled task (Windows)
    linux/deskdex-tray.desktop        the tray's desktop entry, as packagers ship it
    linux/org.deskdex.SearchProvider.service  D-Bus activation of ``deskdex shell-search``
    linux/deskdex-search-provider.ini GNOME Shell's search provider (docs/desktop.md)
    linux/deskdex-krunner.desktop     KRunner's D-Bus plugin

The shell scripts beside them (system-deps*.sh) set up a test or benchmark machine and are not
installed.
"""

from __future__ import annotations

from importlib.resources import files


def read_text(*parts: str) -> str:
    """The text of ``packaging/<parts...>`` as installed; FileNotFoundError when it is missing."""
    return files(__name__).joinpath(*parts).read_text(encoding="utf-8")
