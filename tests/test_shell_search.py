"""The desktop's search box (docs/desktop.md): `deskdex shell-search` on a real private session bus
(dbus-daemon), ACTIVATED by that bus from the .service file `deskdex service install` wrote, answering
GNOME Shell's org.gnome.Shell.SearchProvider2 and KRunner's org.kde.krunner1 through a real daemon
with a few indexed files; each method called with gdbus, as a shell would call it.

Mocked: only the desktop's opener and clipboard. A fake `xdg-open` first on the bus's PATH stands in
for the desktop's default application, and a fake `xclip` for the clipboard (there is no desktop here):
each records what it was given.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import DESKDEX
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]

BUS_NAME = "org.deskdex.SearchProvider"
PATH = "/org/deskdex/SearchProvider"
GNOME = "org.gnome.Shell.SearchProvider2"
KRUNNER = "org.kde.krunner1"
IDLE = 4.0  # the service's idle timeout here, through its environment variable: above a call's gaps on a busy machine

for tool in ("dbus-daemon", "dbus-send", "gdbus", "desktop-file-validate"):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (packaging/system-deps.sh: dbus-daemon, dbus-bin, libglib2.0-bin, "
                    "desktop-file-utils)", allow_module_level=True)

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <servicedir>{services}</servicedir>
  <policy context="default">
    <!-- as Debian's session.conf: anyone on the bus may call, own a name and be answered -->
    <allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
  </policy>
</busconfig>
"""

FAKE_OPENER = """#!/bin/sh
# Stands in for the desktop's opener (xdg-open): records what it was asked to open.
printf '%s\\n' "$1" >> "{log}"
"""
FAKE_CLIPBOARD = """#!/bin/sh
# Stands in for the clipboard (xclip -selection clipboard): records what it was given.
cat > "{log}"
"""


class Bus:
    """A private session bus (dbus-daemon --nofork) whose service folder is where `service install`
    put the activation file; the services it starts inherit its environment."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.home = root, home
        self.data, self.opened = root / "data", root / "opened.log"
        bin_dir = root / "bin"
        bin_dir.mkdir(parents=True)
        opener = bin_dir / "xdg-open"
        opener.write_text(FAKE_OPENER.format(log=self.opened))
        opener.chmod(0o755)
        self.clipboard = root / "clipboard.log"
        (bin_dir / "xclip").write_text(FAKE_CLIPBOARD.format(log=self.clipboard))
        (bin_dir / "xclip").chmod(0o755)
        self.env = dict(os.environ, XDG_DATA_HOME=str(self.data), XDG_CONFIG_HOME=str(root / "config"),
                        PATH=f"{bin_dir}:{os.environ['PATH']}", DESKDEX_SHELL_SEARCH_IDLE=str(IDLE))
        self.env.pop("DESKDEX_HOME", None)
        self.env.pop("XDG_CURRENT_DESKTOP", None)
        self.env.pop("WAYLAND_DISPLAY", None)  # the clipboard is the fake xclip's
        install = subprocess.run([DESKDEX, "service", "install", "--no-start", "--home", str(home)],
                                 capture_output=True, text=True, env=self.env, timeout=120)
        assert install.returncode == 0, install.stderr
        config = root / "bus.conf"
        config.write_text(BUS_CONFIG.format(dir=root, services=self.data / "dbus-1" / "services"))
        self.log = root / "bus.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(["dbus-daemon", "--nofork", f"--config-file={config}", "--print-address=1"],
                                         stdout=subprocess.PIPE, stderr=log, text=True, env=self.env)
        assert self.proc.stdout is not None
        self.address = self.proc.stdout.readline().strip()
        assert self.address.startswith("unix:"), self.address

    def gdbus(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["gdbus", "call", "--session", *args], capture_output=True, text=True, timeout=60,
                              env=dict(self.env, DBUS_SESSION_BUS_ADDRESS=self.address))
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    def call(self, method: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.gdbus("--dest", BUS_NAME, "--object-path", PATH, "--method", method, *args, check=check)

    def bus_call(self, method: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.gdbus("--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                          "--method", f"org.freedesktop.DBus.{method}", *args, check=check)

    def owner_pid(self) -> int | None:
        """The pid of the process owning the service's name, None when none does (one question: the
        owner may leave between two)."""
        proc = self.bus_call("GetConnectionUnixProcessID", BUS_NAME, check=False)
        if proc.returncode and "NameHasNoOwner" in proc.stderr:
            return None
        assert proc.returncode == 0, proc.stderr
        return int(re.findall(r"\d+", proc.stdout)[-1])

    def opened_lines(self, count: int) -> list[str]:
        """What the fake opener recorded, once it has ``count`` lines (it runs in the background)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = self.opened.read_text().splitlines() if self.opened.exists() else []
            if len(lines) >= count:
                return lines
            time.sleep(0.05)
        return self.opened.read_text().splitlines() if self.opened.exists() else []

    def stop(self) -> None:
        pid = self.owner_pid() if self.proc.poll() is None else None
        self.proc.terminate()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if pid is not None:  # the service leaves when its bus closes: wait for it, it was ours
            deadline = time.monotonic() + 30
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(0.05)


def strings(gdbus_output: str) -> list[str]:
    return re.findall(r"'([^']*)'", gdbus_output)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, Path]]:
    root = tmp_path_factory.mktemp("shellsearch")
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "budget.txt").write_text("Budget for the tomato soup kitchen in 2026.\n")
    (docs / "sub" / "notes.md").write_text("# Garden notes\n\nThe tomato plants need water.\n")
    (docs / "other.txt").write_text("Nothing about vegetables here.\n")
    # The web page on: LaunchSearch opens it at the query.
    daemon = DaemonProcess(root / "home", [docs], extra_config='web = "127.0.0.1:0"\n').start()
    try:
        daemon.wait_for(lambda st: st.get("documents", 0) >= 3, what="three documents")
        yield daemon, docs
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def bus(indexed: tuple[DaemonProcess, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bus]:
    b = Bus(tmp_path_factory.mktemp("bus"), indexed[0].home)
    yield b
    b.stop()


def test_files_installed_validate_and_uninstall(bus: Bus, tmp_path: Path) -> None:
    data = bus.data
    desktop = [data / "applications" / "deskdex-tray.desktop", data / "krunner" / "dbusplugins" / "deskdex-krunner.desktop"]
    proc = subprocess.run(["desktop-file-validate", *map(str, desktop)], capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr
    ini = configparser.ConfigParser()
    ini.read(data / "gnome-shell" / "search-providers" / "deskdex-search-provider.ini")
    provider = ini["Shell Search Provider"]
    assert (provider["BusName"], provider["ObjectPath"], provider["Version"]) == (BUS_NAME, PATH, "2")
    assert (data / "applications" / provider["DesktopId"]).exists()
    krunner = configparser.ConfigParser(interpolation=None)
    krunner.read(desktop[1])
    entry = krunner["Desktop Entry"]
    assert (entry["X-Plasma-DBusRunner-Service"], entry["X-Plasma-DBusRunner-Path"]) == (BUS_NAME, PATH)
    service = configparser.ConfigParser(interpolation=None)
    service.read(data / "dbus-1" / "services" / f"{BUS_NAME}.service")
    assert service["D-BUS Service"]["Name"] == BUS_NAME
    assert service["D-BUS Service"]["Exec"] == f"{DESKDEX} shell-search --home {bus.home}"

    # uninstall removes every one of them (here from a copy installed elsewhere)
    env = dict(bus.env, XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    subprocess.run([DESKDEX, "service", "install", "--no-start"], env=env, check=True, capture_output=True)
    written = [p for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert len(written) == 4, written
    status = json.loads(subprocess.run([DESKDEX, "service", "status", "--json"], env=env, check=True,
                                       capture_output=True, text=True).stdout)
    assert status["search_box"] == {str(p): True for p in written}, status
    subprocess.run([DESKDEX, "service", "uninstall"], env=env, check=True, capture_output=True)
    assert not [p for p in (tmp_path / "data").rglob("*") if p.is_file()]


def test_the_bus_activates_the_service_which_answers_gnome_shell(bus: Bus, indexed: tuple[DaemonProcess, Path]) -> None:
    docs = indexed[1]
    assert BUS_NAME in bus.bus_call("ListActivatableNames").stdout
    assert bus.owner_pid() is None  # nothing runs before a shell asks

    ids = strings(bus.call(f"{GNOME}.GetInitialResultSet", "['tomato']").stdout)
    budget, notes = (docs / "budget.txt").as_uri(), (docs / "sub" / "notes.md").as_uri()
    assert set(ids) == {budget, notes}
    pid = bus.owner_pid()  # started by the bus from the .service file, not by this test
    assert pid is not None
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    assert argv[-3:] == [b"shell-search", b"--home", str(bus.home).encode()], argv

    metas = bus.call(f"{GNOME}.GetResultMetas", f"['{notes}', 'file:///no/such/result', '{budget}']").stdout
    assert metas.count("'id'") == 2  # the unknown id has no metas, the others theirs
    assert f"'description': <'{docs}/sub/notes.md'>" in metas
    assert "'name': <'Garden notes'>" in metas
    assert f"'clipboardText': <'{docs}/budget.txt'>" in metas
    assert "'gicon': <'. GThemedIcon text-plain text-x-generic'>" in metas

    # A word no document holds finds what is about it, said to be related (docs/search.md, "Meaning").
    assert strings(bus.call(f"{GNOME}.GetInitialResultSet", "['spending']").stdout) == [budget]
    metas = bus.call(f"{GNOME}.GetResultMetas", f"['{budget}']").stdout
    assert f"'description': <'related by meaning · {docs}/budget.txt'>" in metas, metas

    narrowed = strings(bus.call(f"{GNOME}.GetSubsearchResultSet", str(ids), "['tomato', 'soup']").stdout)
    assert narrowed == [budget]
    assert strings(bus.call(f"{GNOME}.GetInitialResultSet", "['vegetables']").stdout) == [(docs / "other.txt").as_uri()]

    bus.call(f"{GNOME}.ActivateResult", budget, "['tomato']", "0")
    assert bus.opened_lines(1) == [str(docs / "budget.txt")]
    # an id it never returned opens nothing, and the service keeps answering
    bus.call(f"{GNOME}.ActivateResult", "/etc/shadow", "['x']", "0")
    bus.call(f"{GNOME}.LaunchSearch", "['tomato', 'soup']", "0")
    opened = bus.opened_lines(2)
    assert len(opened) == 2 and opened[0] == str(docs / "budget.txt"), opened
    url = opened[1]
    assert url.startswith("http://127.0.0.1:") and url.endswith("q=tomato+soup"), url
    assert bus.owner_pid() == pid  # one process answered every call
    # deskdex's own page: the token in the address signs a browser in (a cookie) and redirects it to
    # the search page, which a browser with the cookie reaches, as this client does
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with browser.open(url, timeout=60) as page:
        assert page.status == 200 and "deskdex" in page.read().decode()


def test_krunner(bus: Bus, indexed: tuple[DaemonProcess, Path]) -> None:
    docs = indexed[1]
    actions = bus.call(f"{KRUNNER}.Actions").stdout
    assert strings(actions) == ["open", "Open", "document-open", "open-folder", "Open containing folder",
                                "folder-open", "copy-path", "Copy path", "edit-copy"]
    assert "'MinLetterCount': <2>" in bus.call(f"{KRUNNER}.Config").stdout
    matches = bus.call(f"{KRUNNER}.Match", "soup").stdout
    budget = (docs / "budget.txt").as_uri()
    assert matches.startswith(f"([('{budget}', 'budget.txt', 'text-plain', 30, ") or \
        matches.startswith(f"([('{budget}', 'Budget for the tomato soup kitchen in 2026.', 'text-plain', 30, "), matches
    assert matches.count(budget) == 2  # the id and the urls property: one match
    assert f"'subtext': <'{docs}/budget.txt'>" in matches
    assert "'actions': <['open', 'open-folder', 'copy-path']>" in matches
    before = len(bus.opened_lines(0))
    bus.call(f"{KRUNNER}.Run", budget, "open-folder")
    bus.call(f"{KRUNNER}.Run", budget, "")
    assert bus.opened_lines(before + 2)[before:] == [str(docs), str(docs / "budget.txt")]
    bus.call(f"{KRUNNER}.Run", budget, "copy-path")
    assert bus.clipboard.read_text() == str(docs / "budget.txt")  # Run answers once the copy is made


def test_command_without_a_bus_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    for extra, args, said in (({}, (), "no session bus: $DBUS_SESSION_BUS_ADDRESS is not set"),
                              ({"DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/none"}, (),
                               f"cannot reach the session bus at 'unix:path={tmp_path}/none'"),
                              ({}, ("--idle", "0"), "--idle must be more than 0 seconds"),
                              ({"DESKDEX_SHELL_SEARCH_IDLE": "soon"}, (), "must be a number of seconds, not 'soon'")):
        proc = subprocess.run([DESKDEX, "shell-search", *args], env=dict(env, **extra), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode in (1, 2) and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_bad_input_is_answered_not_crashed_on(bus: Bus) -> None:
    for terms in ("['\"(', 'type:', ')))']", "['" + "x" * 10_000 + "']", "['c++', 'a:b:c', '*']", "['']"):
        assert bus.call(f"{GNOME}.GetInitialResultSet", terms).stdout.strip() in ("(@as [],)", "([],)")
    # dbus-send sends what it is told (gdbus would check the arguments against the introspection first)
    wrong = subprocess.run(["dbus-send", "--session", "--print-reply", f"--dest={BUS_NAME}", PATH,
                            f"{GNOME}.GetInitialResultSet", "string:a string"], capture_output=True, text=True,
                           timeout=60, env=dict(bus.env, DBUS_SESSION_BUS_ADDRESS=bus.address))
    assert wrong.returncode != 0 and "InvalidArgs" in wrong.stderr and "takes (as)" in wrong.stderr, wrong.stderr
    unknown = bus.gdbus("--dest", BUS_NAME, "--object-path", PATH, "--method", "org.example.Nothing.Here",
                        check=False)
    assert unknown.returncode != 0 and "UnknownMethod" in unknown.stderr
    bus.call(f"{KRUNNER}.Run", "no-such-id", "open")
    assert bus.call(f"{KRUNNER}.Match", "").stdout.strip() in ("(@a(sssida{sv}) [],)", "([],)")
    assert bus.owner_pid() is not None  # still serving


def test_exits_when_idle_and_is_activated_again(bus: Bus) -> None:
    bus.call(f"{KRUNNER}.Config")
    first = bus.owner_pid()
    assert first is not None
    deadline = time.monotonic() + IDLE + 30
    while bus.owner_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert bus.owner_pid() is None, "still serving long after its idle timeout"
    assert bus.call(f"{GNOME}.GetInitialResultSet", "['tomato']").stdout.count("file://") == 2
    assert bus.owner_pid() not in (None, first)


def test_no_daemon_answers_nothing_and_says_why(tmp_path: Path) -> None:
    nobody = tmp_path / "nohome"
    b = Bus(tmp_path / "bus", nobody)
    try:
        assert b.call(f"{GNOME}.GetInitialResultSet", "['tomato']").stdout.strip() == "(@as [],)"
        assert b.call(f"{KRUNNER}.Match", "tomato").stdout.strip() == "(@a(sssida{sv}) [],)"
        log = b.log.read_text()
        assert "no results: the deskdex daemon is not running" in log, log
        assert log.count("no results:") == 1  # said once, not at every key typed
    finally:
        b.stop()


def test_a_user_without_a_daemon_is_answered_by_the_next_one(indexed: tuple[DaemonProcess, Path],
                                                             tmp_path: Path) -> None:
    """The sockets are tried in order (clients/ask.py daemon_sockets: the home's daemon, then the
    system daemon for a user who has none): the first missing, the running daemon answers. The
    system daemon's socket is a fixed path under /run: the test's daemon stands in for it."""
    from deskdex.clients.shellsearch import Searcher

    daemon, docs = indexed
    missing = str(tmp_path / "none" / "deskdex.sock")
    searcher = Searcher([missing, daemon.socket])
    try:
        hits = searcher.search(["tomato"])
        assert len(hits) == 2 and searcher.socket_path == daemon.socket, hits
    finally:
        searcher.close()
    nothing = Searcher([missing, str(tmp_path / "also-none.sock")])
    assert nothing.search(["tomato"]) == []
