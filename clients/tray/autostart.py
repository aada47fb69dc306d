"""Start the tray at login: an XDG autostart entry on Linux (``~/.config/autostart``), a LaunchAgent on
macOS, a command file in the Startup folder on Windows. ``packaging/linux/deskdex-tray.desktop`` is the
entry as packagers ship it (``Exec=deskdex tray``); the autostart entry is that file, installed as package
data, with an Exec line that runs this installation's ``deskdex``."""

from __future__ import annotations

import logging
import os
import plistlib
import shutil
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

NAME = "deskdex-tray"


def command(home: str | None = None) -> list[str]:
    """How to start the tray from a login session, where the PATH may not hold the venv's scripts."""
    script = Path(sys.executable).parent / ("deskdex.exe" if os.name == "nt" else "deskdex")
    if script.exists():
        argv = [str(script)]
    elif shutil.which("deskdex"):
        argv = [str(shutil.which("deskdex"))]
    else:
        argv = [sys.executable, "-m", "deskdex.clients.cli"]
    argv.append("tray")
    if home:
        argv += ["--home", os.path.abspath(os.path.expanduser(home))]
    return argv


def _quote(arg: str) -> str:
    """Quote one argument as the Desktop Entry spec wants (its Exec key has its own rules)."""
    if arg and not any(c in arg for c in ' \t\n"\'\\><~|&;$*?#()`'):
        return arg
    return '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'


def desktop_entry(argv: list[str]) -> str:
    """The shipped entry (package data) with its Exec line running ``argv``."""
    from deskdex import packaging

    lines = packaging.read_text("linux", f"{NAME}.desktop").splitlines(keepends=True)
    return "".join("Exec=" + " ".join(_quote(a) for a in argv) + "\n" if line.startswith("Exec=") else line
                   for line in lines)


def entry_path() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "LaunchAgents" / "org.deskdex.tray.plist"
    if os.name == "nt":
        startup = Path(os.environ["APPDATA"]) / "Microsoft" / "Windows" / "Start Menu" / "Programs" / "Startup"
        return startup / f"{NAME}.cmd"
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(config) / "autostart" / f"{NAME}.desktop"


def install(home: str | None = None) -> Path:
    """Write the entry for this platform (replacing an older one) and return where it went."""
    path, argv = entry_path(), command(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    if sys.platform == "darwin":
        path.write_bytes(plistlib.dumps({"Label": "org.deskdex.tray", "ProgramArguments": argv, "RunAtLoad": True}))
    elif os.name == "nt":
        path.write_text('@start "" ' + " ".join(f'"{a}"' for a in argv) + "\r\n", encoding="utf-8")
    else:
        path.write_text(desktop_entry(argv), encoding="utf-8")
    logger.info("autostart entry written to %s", path)
    return path


def uninstall() -> Path | None:
    """Remove the entry; returns its path, or None when there was none."""
    path = entry_path()
    if not path.exists():
        return None
    path.unlink()
    return path
