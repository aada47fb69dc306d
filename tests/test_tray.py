"""The tray client for real under Xvfb: a real X server, the real Qt xcb platform, a daemon stand-in
(tests/fake_daemon.py) in its own process on a real Unix socket.

Bare Xvfb has no tray host, so QSystemTrayIcon.isSystemTrayAvailable() is false and the icon cannot be
clicked: the menu is tested through its QActions (the very objects the tray's menu shows), and the windows
directly. Opening a file with the desktop's default application cannot happen on a test machine: the search
window's ``opener`` is replaced by a recorder, the only stand-in here. Screenshots go to test-artifacts/."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from deskdex.paths import Home

from .conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts"


def need_qt() -> None:
    try:
        import PySide6.QtWidgets  # noqa: F401
    except ImportError as exc:  # the extra, or a system library Qt needs (packaging/system-deps.sh)
        pytest.skip(f"Qt cannot be imported ({exc}): pip install -e '.[tray]' and run packaging/system-deps.sh")


@pytest.fixture(scope="session")
def xvfb() -> Iterator[str]:
    """A private X server; Xvfb picks a free display itself (-displayfd) and writes it once it listens."""
    need_qt()
    if not shutil.which("Xvfb"):
        pytest.skip("Xvfb is not installed (packaging/system-deps.sh installs it)")
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        number = f.readline().strip()  # written only when the server accepts connections
    if not number:
        proc.kill()
        pytest.fail("Xvfb did not start")
    display = f":{number}"
    saved = {k: os.environ.get(k) for k in ("DISPLAY", "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    os.environ.update(DISPLAY=display, QT_QPA_PLATFORM="xcb")
    os.environ.pop("WAYLAND_DISPLAY", None)
    yield display
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def qapp(xvfb: str) -> Any:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["deskdex-test"])
    assert app.platformName() == "xcb"
    return app


class FakeDaemon:
    def __init__(self, home: Path) -> None:
        self.socket = Home.resolve(str(home)).socket
        self.log = home / "requests.jsonl"
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fake_daemon", self.socket, "--log", str(self.log)],
                                     cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def requests(self, op: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        reqs = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in reqs if op is None or r["op"] == op]

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(10) == 0
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def daemon(home: Path) -> Iterator[FakeDaemon]:
    d = FakeDaemon(home)
    yield d
    d.stop()


@pytest.fixture
def tray(qapp: Any, daemon: FakeDaemon) -> Iterator[Any]:
    from deskdex.clients.tray.app import TrayApp

    t = TrayApp(daemon.socket, poll_ms=150)
    t.start()
    wait_for(lambda: t.error is None, "the tray's first status")
    yield t
    t.close()


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 15.0) -> None:
    from PySide6.QtTest import QTest

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        QTest.qWait(20)


def choose_in_picker(dlg: Any, folder: Path) -> None:
    """Type the folder's path into Qt's own folder picker and press Open, as a user does."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QDialogButtonBox, QLineEdit

    assert QTest.qWaitForWindowExposed(dlg, 3000)
    name = dlg.findChild(QLineEdit, "fileNameEdit")
    # A user types into the dialog they are looking at. Unfocused (Xvfb has no window manager to
    # activate it), the dialog keeps every directory the typed prefix passed through ("/", "/tmp")
    # selected, and with several selected it never emits fileSelected: the CI failure of stop 10.
    dlg.activateWindow()
    assert QTest.qWaitForWindowActive(dlg, 3000)
    name.setFocus()
    wait_for(name.hasFocus, "the file name field focused")
    name.clear()
    QTest.keyClicks(name, str(folder))
    assert dlg.selectedFiles() == [str(folder)]
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Open).click()


def screenshot(name: str, widget: Any) -> Path:
    """The X screen as Xvfb holds it (what a user would see), kept in test-artifacts/."""
    from PySide6.QtTest import QTest

    assert QTest.qWaitForWindowExposed(widget, 3000)
    QTest.qWait(100)  # let the last paint reach the server
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    img = widget.screen().grabWindow(0).toImage()
    assert img.save(str(path))
    g = widget.frameGeometry()
    colors = {img.pixel(x, y) for x in range(g.left() + 5, g.right() - 5, 7)
              for y in range(g.top() + 5, g.bottom() - 5, 7)}
    assert len(colors) > 5, "the window area of the screenshot is blank"
    return path


def titles(window: Any) -> list[str]:
    r = window.results
    return [r.topLevelItem(i).text(0) for i in range(r.topLevelItemCount())]


def test_search_as_you_type(tray: Any, daemon: FakeDaemon) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    opened: list[str] = []
    tray.search_action.trigger()
    w = tray.search_window
    w.opener = opened.append
    assert w.isVisible()
    QTest.keyClicks(w.box, "budget", delay=30)  # a fast typist: events are processed between keys
    assert daemon.requests("search") == [], "searched before the debounce delay"
    wait_for(lambda: w.results.topLevelItemCount() == 2, "two results")
    # one request for the whole word: the keystrokes were debounced
    assert [r["query"] for r in daemon.requests("search")] == ["budget"]
    shown = titles(w)
    assert shown[0].startswith("Quarterly budget 2026 — /home/ada/Documents/reports/quarterly-budget-2026.pdf")
    assert shown[0].endswith("2 near-duplicates")
    assert shown[1].startswith("Budget meeting notes") and "cop" not in shown[1]
    assert w.info.text() == "2 results"
    from deskdex.clients.tray.search_window import HTML_ROLE

    assert "<b>budget</b>" in w.results.topLevelItem(0).data(0, HTML_ROLE)

    first = w.results.topLevelItem(0)
    first.setExpanded(True)
    wait_for(lambda: first.childCount() == 2, "the copies of the first result")
    assert [first.child(i).text(0) for i in range(2)] == ["/home/ada/Backup/quarterly-budget-2026.pdf",
                                                         "/home/ada/Desktop/budget copy.pdf"]
    print("screenshot:", screenshot("search-window.png", w))

    QTest.keyClick(w.box, Qt.Key.Key_Return)
    QTest.keyClick(w.box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert opened == ["/home/ada/Documents/reports/quarterly-budget-2026.pdf", "/home/ada/Documents/reports"]

    w.box.clear()
    QTest.keyClicks(w.box, '"tarte')
    wait_for(lambda: "unbalanced quote" in w.info.text(), "the daemon's error shown")
    assert w.results.topLevelItemCount() == 0


def test_pause_and_resume_from_the_menu(tray: Any, daemon: FakeDaemon) -> None:
    assert tray.menu.actions()[2:4] == [tray.search_action, tray.pause_action]
    assert tray.state_action.text() == "Idle: 1,544 documents, 7 failed"
    tray.pause_action.trigger()
    wait_for(lambda: tray.state == "paused", "the paused state")
    assert tray.pause_action.text() == "Resume indexing"
    assert "Paused" in tray.tray.toolTip()
    tray.pause_action.trigger()
    wait_for(lambda: tray.state == "idle", "the idle state again")
    assert [r["op"] for r in daemon.requests() if r["op"] in ("pause", "resume")] == ["pause", "resume"]
    tray.status_action.trigger()
    assert tray.status_box is not None and tray.status_box.isVisible()
    assert "corrupt 5, timeout 2" in tray.status_box.text()


def test_no_daemon_shows_the_error(qapp: Any, tmp_path: Path) -> None:
    from deskdex.clients.tray.app import TrayApp

    t = TrayApp(str(tmp_path / "nothing.sock"), poll_ms=100)
    t.start()
    try:
        wait_for(lambda: t.state_action.text().startswith("Error"), "the error state")
        assert "not running" in t.state_action.text()
        assert not t.pause_action.isEnabled()
    finally:
        t.close()


def test_add_a_folder_through_the_picker(tray: Any, daemon: FakeDaemon, tmp_path: Path) -> None:
    from PySide6.QtTest import QTest

    folder = tmp_path / "Papers"
    folder.mkdir()
    w = tray.folders_window
    w.native_dialog = False  # Qt's own dialog, which a test can drive (a native one belongs to the desktop)
    tray.folders_action.trigger()
    wait_for(lambda: w.table.rowCount() == 2 and w.patterns.count() == 2, "the folders and exclusions")
    assert [w.table.item(0, c).text() for c in range(3)] == ["/home/ada/Documents", "1,234", "7"]

    w.add_button.click()
    dlg = w.dialog
    assert dlg is not None
    choose_in_picker(dlg, folder)
    wait_for(lambda: w.table.rowCount() == 3, "the new folder listed")
    assert daemon.requests("watch_add") == [{"op": "watch_add", "path": str(folder)}]
    assert str(folder) in [w.table.item(r, 0).text() for r in range(3)]
    print("screenshot:", screenshot("folders-window.png", w))

    QTest.keyClicks(w.pattern_edit, "*.bak")
    QTest.keyClick(w.pattern_edit, "\r")
    wait_for(lambda: w.patterns.count() == 3, "the new exclusion")
    assert daemon.requests("exclude_add") == [{"op": "exclude_add", "pattern": "*.bak"}]

    w.confirm = lambda parent, path: True  # the user's "Yes" to the confirmation box
    w.table.selectRow([w.table.item(r, 0).text() for r in range(3)].index(str(folder)))
    w.remove_button.click()
    wait_for(lambda: w.table.rowCount() == 2, "the folder removed")
    assert daemon.requests("watch_remove") == [{"op": "watch_remove", "path": str(folder)}]


def test_tray_process_runs_until_terminated(xvfb: str, daemon: FakeDaemon, home: Path) -> None:
    """`deskdex tray` as a real process: with no tray host it shows the search window and polls the daemon."""
    env = dict(os.environ, DESKDEX_HOME=str(home))
    proc = subprocess.Popen([sys.executable, "-m", "deskdex.clients.tray"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while not daemon.requests("status") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        assert daemon.requests("status")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 0, err
    assert "no system tray" in err


def test_missing_extra_says_how_to_install(home: Path) -> None:
    code = "import sys; sys.modules['PySide6'] = None\nfrom deskdex.clients.tray.__main__ import main\nsys.exit(main([]))"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, DESKDEX_HOME=str(home)))
    assert p.returncode == 1
    assert "pip install 'deskdex[tray]'" in p.stderr and "Traceback" not in p.stderr


def test_autostart_entry(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    from deskdex.clients.tray import autostart
    from deskdex.clients.tray.__main__ import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "my config"))
    assert main(["--install-autostart", "--home", str(home)]) == 0
    entry = tmp_path / "my config" / "autostart" / "deskdex-tray.desktop"
    assert str(entry) in capsys.readouterr().out
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(entry)
    e = parser["Desktop Entry"]
    assert e["Type"] == "Application" and e["Terminal"] == "false"
    assert e["Exec"].endswith(f"tray --home {home}")
    assert main(["--uninstall-autostart"]) == 0 and not entry.exists()
    # what packagers ship is what the command writes, minus the absolute paths
    shipped = (ROOT / "packaging" / "linux" / "deskdex-tray.desktop").read_text()
    assert shipped == autostart.desktop_entry(["deskdex", "tray"])
    assert autostart.desktop_entry(["/opt/my apps/deskdex", "tray"]).count('Exec="/opt/my apps/deskdex" tray') == 1


def test_icons_show_the_state(qapp: Any) -> None:
    from deskdex.clients.tray import icons

    def pixels(state: str, progress: float | None = None) -> list[int]:
        img = icons.draw(state, progress, 32).toImage()
        return [img.pixel(x, y) for x in range(32) for y in range(32)]

    idle = pixels("idle")
    assert pixels("paused") != idle and pixels("error") != idle
    assert pixels("indexing", 0.1) != pixels("indexing", 0.9)
    assert len(set(idle)) > 3
    assert not icons.icon("indexing", 0.5).isNull()


def test_snippet_highlight_is_escaped() -> None:
    need_qt()
    from deskdex.clients.tray.search_window import snippet_html

    assert snippet_html("a <b> budget & more", [[6, 12], [8, 10]]) == "a &lt;b&gt; <b>budget</b> &amp; more"


def test_search_window_against_the_real_daemon(qapp: Any, tmp_path: Path) -> None:
    """The tray with a real `deskdex daemon` (not the stand-in): type, see real results and duplicates."""
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.app import TrayApp

    from .daemon_fixture import DaemonProcess

    docs = tmp_path / "docs"
    docs.mkdir()
    body = " ".join(f"sentence {i} about the lighthouse keeper and the northern harbour lights." for i in range(30))
    (docs / "keeper.txt").write_text("Lighthouse keeper\n\n" + body)
    (docs / "keeper-copy.txt").write_text("Lighthouse keeper\n\n" + body)
    (docs / "ferry.txt").write_text("Ferry timetable\n\nThe ferry to the lighthouse leaves at noon.\n")
    real = DaemonProcess(tmp_path / "home", [docs]).start()
    t = TrayApp(real.socket, poll_ms=150)
    try:
        t.start()
        wait_for(lambda: t.error is None, "the tray's first status from the real daemon")
        t.search_action.trigger()
        w = t.search_window
        QTest.keyClicks(w.box, "lighthouse", delay=30)
        wait_for(lambda: w.results.topLevelItemCount() == 2, "two results (the copy folded into its original)",
                 timeout=15)
        shown = titles(w)
        keeper = next(s for s in shown if s.startswith("Lighthouse keeper"))
        assert "1 near-duplicate" in keeper, shown
        assert any(s.startswith("Ferry timetable") for s in shown)
        item = next(w.results.topLevelItem(i) for i in range(2) if w.results.topLevelItem(i).text(0) == keeper)
        item.setExpanded(True)
        wait_for(lambda: item.childCount() == 1, "the copy listed under its original")
        assert item.child(0).text(0) in (str(docs / "keeper.txt"), str(docs / "keeper-copy.txt"))
        print("screenshot:", screenshot("search-window-real-daemon.png", w))
    finally:
        t.close()
        real.stop()


def test_add_a_folder_with_the_real_daemon(qapp: Any, tmp_path: Path) -> None:
    """Adding a folder through the tray's picker makes a real daemon index it: search finds its file."""
    from deskdex.clients.tray.app import TrayApp

    from .daemon_fixture import DaemonProcess

    docs, papers = tmp_path / "docs", tmp_path / "Papers"
    docs.mkdir()
    papers.mkdir()
    (docs / "a.txt").write_text("nothing special\n")
    (papers / "thesis.txt").write_text("a thesis on the migration of the arctic tern\n")
    real = DaemonProcess(tmp_path / "home", [docs]).start()
    t = TrayApp(real.socket, poll_ms=150)
    try:
        t.start()
        wait_for(lambda: t.error is None, "the tray's first status from the real daemon")
        w = t.folders_window
        w.native_dialog = False
        t.folders_action.trigger()
        wait_for(lambda: w.table.rowCount() == 1, "the watched folder listed")
        w.add_button.click()
        dlg = w.dialog
        assert dlg is not None
        choose_in_picker(dlg, papers)
        wait_for(lambda: w.table.rowCount() == 2, "the new folder listed", timeout=20)
        real.eventually("tern", [str(papers / "thesis.txt")], timeout=30)
        print("screenshot:", screenshot("folders-window-real-daemon.png", w))
    finally:
        t.close()
        real.stop()
