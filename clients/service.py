"""``deskdex service install|uninstall|status``: run the daemon at login, at idle priority.

A systemd user unit on Linux, a launchd agent on macOS, a scheduled task on Windows, each
rendered from its template, package data of deskdex.packaging (``packaging/`` in the repository).
The service runs ``deskdex daemon`` (the console script beside this Python, else
``python -m deskdex daemon``), with ``--home`` when given.

On Linux it also writes the files through which the desktop's search box finds deskdex
(docs/desktop.md): the D-Bus activation file that starts ``deskdex shell-search`` when GNOME Shell or
KRunner first asks, GNOME Shell's search provider, the application entry that provider names, and
KRunner's D-Bus plugin, each under $XDG_DATA_HOME.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from xml.sax.saxutils import escape

from deskdex.errors import ServiceError

logger = logging.getLogger(__name__)

NAME = "deskdex"
SYSTEMD_UNIT = "deskdex.service"
LAUNCHD_LABEL = "org.deskdex.daemon"
DBUS_SERVICE = "org.deskdex.SearchProvider.service"  # the bus finds it by its name: the bus name + .service
GNOME_PROVIDER = "deskdex-search-provider.ini"
KRUNNER_PLUGIN = "deskdex-krunner.desktop"
# What to run once a user systemd manager is reachable, after `service install` could not reach one.
_ENABLE_HINT = ("Where a user manager runs (a desktop login; over ssh, after `loginctl enable-linger $USER`): "
                f"systemctl --user daemon-reload && systemctl --user enable --now {SYSTEMD_UNIT}")


@dataclass(frozen=True, slots=True)
class Unit:
    kind: str  # "systemd", "launchd", "task"
    path: str  # where install() writes it
    text: str


def command(home: str | None = None, python: str = sys.executable, subcommand: str = "daemon") -> list[str]:
    """The daemon's (or ``subcommand``'s) command line: the console script if it sits beside ``python``."""
    script = os.path.join(os.path.dirname(python), "deskdex.exe" if os.name == "nt" else "deskdex")
    argv = [script] if os.path.exists(script) else [python, "-m", "deskdex.clients.cli"]
    argv.append(subcommand)
    if home:
        argv += ["--home", os.path.abspath(home)]
    return argv


def kind_for(platform: str = sys.platform) -> str:
    if platform.startswith("linux"):
        return "systemd"
    if platform == "darwin":
        return "launchd"
    if platform == "win32":
        return "task"
    raise ServiceError(f"no service manager support for {platform}")


def render(kind: str | None = None, home: str | None = None, argv: list[str] | None = None,
           target_dir: str | None = None) -> Unit:
    """The unit text for ``kind`` (this platform's by default) and where it goes."""
    kind = kind or kind_for()
    argv = argv or command(home)
    if kind == "systemd":
        text = _template("systemd", SYSTEMD_UNIT).replace("ExecStart=@EXEC@", "ExecStart=" + " ".join(map(_systemd_quote, argv)))
        folder = target_dir or os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"),
                                            "systemd", "user")
        return Unit(kind, os.path.join(folder, SYSTEMD_UNIT), text)
    if kind == "launchd":
        args = "\n".join(f"    <string>{escape(a)}</string>" for a in argv)
        text = _template("launchd", LAUNCHD_LABEL + ".plist").replace("@ARGS@", args)
        folder = target_dir or os.path.expanduser("~/Library/LaunchAgents")
        return Unit(kind, os.path.join(folder, LAUNCHD_LABEL + ".plist"), text)
    if kind == "task":
        args = subprocess.list2cmdline(argv[1:])
        text = (_template("windows", "deskdex-task.xml").replace("@COMMAND@", escape(argv[0]))
                .replace("@ARGUMENTS@", escape(args)))
        folder = target_dir or os.path.join(os.environ.get("LOCALAPPDATA") or os.path.expanduser("~"), NAME)
        return Unit(kind, os.path.join(folder, "deskdex-task.xml"), text)
    raise ServiceError(f"unknown service kind {kind!r}")


def install(home: str | None = None, start: bool = True) -> Unit:
    """Write the unit, register it and (with ``start``) start it now.

    Where no user systemd manager is reachable (containers, ssh sessions, machines without
    systemd) the unit is still written: without ``start`` that is success, and stderr says how to
    enable it once a manager runs; with ``start`` it is a ServiceError, since nothing can start it.
    """
    unit = render(home=home)
    _write(unit)
    if unit.kind == "systemd":
        # Before the unit is started: the search box's files work with a daemon started any other way.
        for desktop_file in desktop_files(home):
            _write(desktop_file, mode=0o644)  # read by the bus, the shell, KRunner: the user's own programs
        _gnome_hint()
        unreachable = systemd_unreachable()
        if unreachable is None:
            _run(["systemctl", "--user", "daemon-reload"])
            _run(["systemctl", "--user", "enable", *(["--now"] if start else []), SYSTEMD_UNIT])
        elif start:
            raise ServiceError(f"wrote {unit.path} but cannot start it: {unreachable}. {_ENABLE_HINT}")
        else:
            # Printed here rather than logged: the command line shows only errors from its logger,
            # and this is what the person who ran `service install --no-start` needs next.
            print(f"deskdex: not enabled yet, {unreachable}. {_ENABLE_HINT}", file=sys.stderr)
    elif unit.kind == "launchd":
        _run(["launchctl", "bootstrap", f"gui/{os.getuid()}", unit.path])
    else:
        _run(["schtasks", "/Create", "/TN", NAME, "/XML", unit.path, "/F"])
        if start:
            _run(["schtasks", "/Run", "/TN", NAME])
    logger.info("installed %s", unit.path)
    return unit


def desktop_files(home: str | None = None, argv: list[str] | None = None,
                  data_home: str | None = None) -> list[Unit]:
    """The files of the desktop's search box (Linux), under ``data_home`` ($XDG_DATA_HOME by default):
    the D-Bus activation file running ``argv`` (``deskdex shell-search``), GNOME Shell's search
    provider, the tray's application entry (the provider's DesktopId) and KRunner's D-Bus plugin."""
    from .tray import autostart

    data = data_home or os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    argv = argv or command(home, subcommand="shell-search")
    # The bus splits Exec as a shell does (quotes, backslashes), and wants an absolute program.
    bus = _template("linux", DBUS_SERVICE).replace("Exec=@EXEC@", "Exec=" + shlex.join(argv))
    return [Unit("dbus", os.path.join(data, "dbus-1", "services", DBUS_SERVICE), bus),
            Unit("gnome-shell", os.path.join(data, "gnome-shell", "search-providers", GNOME_PROVIDER),
                 _template("linux", GNOME_PROVIDER)),
            Unit("application", os.path.join(data, "applications", autostart.NAME + ".desktop"),
                 autostart.desktop_entry(autostart.command(home))),
            Unit("krunner", os.path.join(data, "krunner", "dbusplugins", KRUNNER_PLUGIN),
                 _template("linux", KRUNNER_PLUGIN))]


def _gnome_hint() -> None:
    """GNOME Shell reads search providers from $XDG_DATA_DIRS only, never $XDG_DATA_HOME: say so where
    it would miss ours (docs/desktop.md)."""
    if "GNOME" not in os.environ.get("XDG_CURRENT_DESKTOP", "").upper().split(":"):
        return
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    dirs = [os.path.realpath(d) for d in os.environ.get("XDG_DATA_DIRS", "").split(":") if d]
    if os.path.realpath(data) not in dirs:
        print(f"deskdex: GNOME Shell reads search providers from $XDG_DATA_DIRS only: add {data} to it to see "
              "deskdex in the Activities search (docs/desktop.md, \"GNOME Shell\")", file=sys.stderr)


def _write(unit: Unit, mode: int = 0o600, folder_mode: int = 0o700) -> None:
    os.makedirs(os.path.dirname(unit.path), mode=folder_mode, exist_ok=True)
    encoding = "utf-16" if unit.kind == "task" else "utf-8"  # schtasks wants what the XML declares
    fd = os.open(unit.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "w", encoding=encoding) as f:
        f.write(unit.text)
    os.chmod(unit.path, mode)  # an older file keeps its mode through O_TRUNC


def systemd_unreachable(user: bool = True) -> str | None:
    """None when ``systemctl --user`` reaches a user manager (``user=False``: ``systemctl`` the
    system's), else why not (systemctl's own words)."""
    if shutil.which("systemctl") is None:
        return "systemctl is not installed"
    scope = ["--user"] if user else []
    try:
        proc = subprocess.run(["systemctl", *scope, "show-environment"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return f"systemctl {' '.join(scope)} did not answer within 30 s".replace("  ", " ")
    if proc.returncode == 0:
        return None
    return (f"no {'user' if user else 'system'} systemd manager is reachable ("
            + ((proc.stderr or proc.stdout).strip() or f"systemctl exited {proc.returncode}") + ")")


def uninstall() -> Unit:
    """Stop the service, unregister it and remove its file. Not installed is not an error."""
    unit = render()
    # Without a reachable manager nothing is registered or running: only the file is left to remove.
    manager = unit.kind == "systemd" and systemd_unreachable() is None
    if manager:
        _run(["systemctl", "--user", "disable", "--now", SYSTEMD_UNIT], check=False)
    elif unit.kind == "launchd":
        _run(["launchctl", "bootout", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"], check=False)
    elif unit.kind == "task":
        _run(["schtasks", "/Delete", "/TN", NAME, "/F"], check=False)
    for path in [unit.path, *(f.path for f in desktop_files(argv=["deskdex"]) if unit.kind == "systemd")]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if manager:
        _run(["systemctl", "--user", "daemon-reload"], check=False)
    return unit


def status() -> dict[str, object]:
    """``{"kind", "path", "installed", "state"}``; state is the manager's word, or "unknown". On Linux
    also ``search_box``: each file of the desktop's search box, and whether it is there."""
    unit = render()
    state = "unknown"
    try:
        if unit.kind == "systemd":
            state = _run(["systemctl", "--user", "is-active", SYSTEMD_UNIT], check=False) or "unknown"
        elif unit.kind == "launchd":
            out = _run(["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"], check=False)
            state = next((line.split("=", 1)[1].strip() for line in out.splitlines()
                          if line.strip().startswith("state =")), "not loaded")
        else:
            out = _run(["schtasks", "/Query", "/TN", NAME, "/FO", "LIST"], check=False)
            state = next((line.split(":", 1)[1].strip() for line in out.splitlines()
                          if line.startswith("Status:")), "not registered")
    except ServiceError as exc:
        state = f"unknown ({exc})"
    st: dict[str, object] = {"kind": unit.kind, "path": unit.path, "installed": os.path.exists(unit.path),
                             "state": state}
    if unit.kind == "systemd":  # the desktop search box's files: which of them are in place
        st["search_box"] = {f.path: os.path.exists(f.path) for f in desktop_files(argv=["deskdex"])}
    return st


def _template(folder: str, name: str) -> str:
    from deskdex import packaging

    try:
        return packaging.read_text(folder, name)
    except OSError as exc:
        raise ServiceError(f"service template missing from the installed package: {folder}/{name} ({exc})") from exc


def _systemd_quote(arg: str) -> str:
    # systemd splits ExecStart like a shell, with C escapes; quote only what needs it.
    return arg if arg and all(c.isalnum() or c in "/._-=:+@," for c in arg) else '"' + \
        arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$") + '"'


def _run(argv: list[str], check: bool = True) -> str:
    if shutil.which(argv[0]) is None:
        raise ServiceError(f"{argv[0]} not found: cannot reach the service manager")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and proc.returncode:
        raise ServiceError(f"{shlex.join(argv)} failed: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout.strip()


# System scope (Linux): the enterprise daemon as a system service, and the search box for every
# user's session. /usr/local by default: /usr belongs to the distribution's package manager, which
# stages the same files with --root and --prefix /usr.
SYSTEM_PREFIX = "/usr/local"
SYSTEM_UNIT_DIR = "/etc/systemd/system"
SYSTEM_TEMPLATE = "deskdex-system.service"


def system_files(root: str = "/", prefix: str = SYSTEM_PREFIX) -> list[Unit]:
    """The files ``install_system`` writes under ``root`` (a package's staging folder; "/" for this
    machine): the unit running ``deskdex daemon --system``, then the search box's files under
    ``prefix``/share, read by every user's session bus, GNOME Shell and KRunner."""
    if kind_for() != "systemd":
        raise ServiceError("--system installs a systemd system service: Linux only")

    def under(path: str) -> str:
        return os.path.join(root, os.path.abspath(path).lstrip("/"))

    daemon = [*command(), "--system"]
    text = _template("systemd", SYSTEM_TEMPLATE).replace("ExecStart=@EXEC@",
                                                         "ExecStart=" + " ".join(map(_systemd_quote, daemon)))
    return [Unit("systemd", under(os.path.join(SYSTEM_UNIT_DIR, SYSTEMD_UNIT)), text),
            *desktop_files(data_home=under(os.path.join(prefix, "share")))]


def install_system(root: str = "/", prefix: str = SYSTEM_PREFIX, start: bool = True) -> list[Unit]:
    """Write the system files (``system_files``), readable by all; on this machine (``root`` "/"),
    as root, also enable the service and (with ``start``) start it. Staged under another root,
    nothing is registered: the package's own scripts do that."""
    files = system_files(root, prefix)
    here = os.path.abspath(root) == "/"
    if here and os.geteuid() != 0:
        raise ServiceError(f"service install --system writes {SYSTEM_UNIT_DIR} and {prefix}/share: run it as root "
                           "(or stage the files for a package with --root DIR)")
    for f in files:
        _write(f, mode=0o644, folder_mode=0o755)
    if not here:
        return files
    unreachable = systemd_unreachable(user=False)
    if unreachable is None:
        _run(["systemctl", "daemon-reload"])
        _run(["systemctl", "enable", *(["--now"] if start else []), SYSTEMD_UNIT])
    elif start:
        raise ServiceError(f"wrote {files[0].path} but cannot start it: {unreachable}")
    else:
        print(f"deskdex: not enabled yet, {unreachable}. Where systemd runs: systemctl daemon-reload && "
              f"systemctl enable --now {SYSTEMD_UNIT}", file=sys.stderr)
    logger.info("installed %s", files[0].path)
    return files


def uninstall_system(root: str = "/", prefix: str = SYSTEM_PREFIX) -> list[Unit]:
    """Stop and disable the system service (on this machine) and remove every file
    ``install_system`` wrote. Not installed is not an error."""
    files = system_files(root, prefix)
    here = os.path.abspath(root) == "/"
    if here and os.geteuid() != 0:
        raise ServiceError("service uninstall --system removes system files: run it as root")
    manager = here and systemd_unreachable(user=False) is None
    if manager:
        _run(["systemctl", "disable", "--now", SYSTEMD_UNIT], check=False)
    for f in files:
        try:
            os.unlink(f.path)
        except FileNotFoundError:
            pass
    if manager:
        _run(["systemctl", "daemon-reload"], check=False)
    return files
