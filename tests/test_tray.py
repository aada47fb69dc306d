"""The tray client for real under Xvfb: a real X server, the real Qt xcb platform, a real `deskdex daemon`
(tests/daemon_fixture.py) on real files in two watched folders, some of them copies of each other.

Bare Xvfb has no tray host, so QSystemTrayIcon.isSystemTrayAvailable() is false and the icon cannot be
clicked: the menu is tested through its QActions (the very objects the tray's menu shows), and the windows
directly. What the tray asks of the daemon is checked by its effect on the daemon (paused, a folder
watched and indexed, an exclusion kept). Opening a file with the desktop's default application cannot
happen on a test machine: the search window's ``opener`` is replaced by a recorder, the only stand-in
here. Screenshots go to test-artifacts/.

Qt is first started in a child process on the Xvfb display: a Qt that cannot start (a system library
missing) aborts its process, and that must fail these tests with Qt's own words, not end the test run."""

from __future__ import annotations

import configparser
import importlib.util
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from .conftest import ROOT
from .daemon_fixture import BUSY_TIMEOUT, CLIENT_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # the daemon's waits are measured in daemon_fixture.Patience

ARTIFACTS = ROOT / "test-artifacts"
WAIT = 60.0  # seconds the tray may take to show what the daemon answered (a busy machine is slow)

# What the child does: what the tray does first.
QT_PROBE = ("from PySide6.QtWidgets import QApplication\n"
            "app = QApplication(['deskdex-qt-probe'])\n"
            "print('platform', app.platformName(), flush=True)\n")
# Lines of Qt's plugin debugging output (and of a Python traceback) that say what went wrong.
TELLING = re.compile(r"cannot open shared object|Cannot load library|could not connect|qt\.qpa\.(plugin|xcb)"
                     r"|failed to start|Error:|not found")


def need_qt() -> None:
    """Skip without the Qt binding (an optional extra); fail, with the reason, where it cannot load."""
    if importlib.util.find_spec("PySide6") is None:
        pytest.skip("PySide6 is not installed: pip install -e '.[tray]'")
    try:
        import PySide6.QtWidgets  # noqa: F401
    except ImportError as exc:  # a system library Qt needs: an ImportError, not an abort
        pytest.fail(f"Qt cannot be imported ({exc}).\n{_packages_hint()}", pytrace=False)


def _platform_plugin(env: dict[str, str]) -> Path:
    spec = importlib.util.find_spec("PySide6")
    assert spec is not None and spec.submodule_search_locations
    folder = env.get("QT_QPA_PLATFORM_PLUGIN_PATH") or os.path.join(spec.submodule_search_locations[0],
                                                                    "Qt", "plugins", "platforms")
    return Path(folder) / "libqxcb.so"


def _packages_hint() -> str:
    """The packages packaging/system-deps.sh would install that are missing here (Debian's dpkg)."""
    script = (ROOT / "packaging" / "system-deps.sh").read_text()
    listed = re.search(r"^PKGS=\(([^)]*)\)", script, re.M)
    if listed is None or not shutil.which("dpkg-query"):
        return "packaging/system-deps.sh lists the system packages Qt's xcb platform needs."
    missing = [p for p in listed.group(1).split()
               if "install ok installed" not in subprocess.run(["dpkg-query", "-W", "-f=${Status}", p],
                                                               capture_output=True, text=True).stdout]
    return ("packaging/system-deps.sh installs what Qt's xcb platform needs; "
            + (f"not installed here: {' '.join(missing)}" if missing else "each package it lists is installed"))


def qt_start_problem(env: dict[str, str]) -> str | None:
    """None if a QApplication starts on the xcb platform with ``env`` (in a child process: a Qt that
    cannot start aborts its process); else what went wrong, in Qt's words, with the platform plugin's
    libraries the dynamic loader cannot find and the missing system packages."""
    try:
        p = subprocess.run([sys.executable, "-c", QT_PROBE], env=dict(env, QT_DEBUG_PLUGINS="1"),
                           capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"Qt did not start within {CLIENT_TIMEOUT:g} s on the display {env.get('DISPLAY')}"
    if p.returncode == 0 and p.stdout.split() == ["platform", "xcb"]:
        return None
    how = f"died of {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exited {p.returncode}"
    said = [ln for ln in p.stderr.splitlines() if TELLING.search(ln)] or p.stderr.splitlines()[-15:]
    plugin = _platform_plugin(env)
    unresolved = []
    if plugin.exists() and shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, env=env).stdout
        unresolved = [ln.split()[0] for ln in ldd.splitlines() if "not found" in ln]
    return (f"Qt cannot start on the X display {env.get('DISPLAY')}: a QApplication in a child process {how}, "
            f"saying:\n  " + "\n  ".join(dict.fromkeys(said))
            + (f"\nlibraries of {plugin} not found: {', '.join(unresolved)}" if unresolved else "")
            + f"\n{_packages_hint()}")


def x_env(display: str) -> dict[str, str]:
    env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb")
    env.pop("WAYLAND_DISPLAY", None)
    return env


@pytest.fixture(scope="session")
def xvfb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private X server on which Qt is known to start; always stopped, whatever happens."""
    need_qt()
    if not shutil.which("Xvfb"):
        pytest.skip("Xvfb is not installed (packaging/system-deps.sh installs it)")
    log = tmp_path_factory.mktemp("xvfb") / "xvfb.log"
    # Xvfb picks a free display itself (-displayfd) and writes its number once it accepts connections.
    cmd = ["Xvfb", "-displayfd", "{fd}", "-screen", "0", "1280x800x24", "-nolisten", "tcp"]
    if shutil.which("setpriv"):  # should this process die without stopping it, the kernel does
        cmd = ["setpriv", "--pdeathsig", "KILL", "--", *cmd]
    r, w = os.pipe()
    with open(log, "wb") as out:
        proc = subprocess.Popen([a.format(fd=w) for a in cmd], pass_fds=(w,), stdout=out, stderr=out)
    os.close(w)
    try:
        with os.fdopen(r) as f:
            number = f.readline().strip() if select.select([f], [], [], CLIENT_TIMEOUT)[0] else ""
        if not number:
            pytest.fail(f"Xvfb did not start:\n{log.read_text(errors='replace')[-2000:]}", pytrace=False)
        display = f":{number}"
        problem = qt_start_problem(x_env(display))
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        saved = {k: os.environ.get(k) for k in ("DISPLAY", "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
        os.environ.update(DISPLAY=display, QT_QPA_PLATFORM="xcb")
        os.environ.pop("WAYLAND_DISPLAY", None)
        try:
            yield display
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def qapp(xvfb: str) -> Iterator[Any]:
    from PySide6.QtWidgets import QApplication

    from deskdex.clients.tray.binding import binding_problem

    # A binding that loses references would abort this very process partway through the tests
    # (they run the tray in it): each test fails with the reason instead, as `deskdex tray` refuses.
    problem = binding_problem()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    app = QApplication.instance() or QApplication(["deskdex-test"])
    assert app.platformName() == "xcb"
    yield app
    for w in app.topLevelWidgets():
        w.close()
    app.processEvents()


@dataclass
class Corpus:
    documents: Path
    projects: Path
    budget: Path  # the oldest of three identical copies, the original: the one a search shows
    copies: list[Path]  # the two others, in the other watched folder too
    notes: Path
    failed: Path


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    ada = tmp_path / "ada"
    documents, projects = ada / "Documents", ada / "Projects"
    budget = documents / "reports" / "quarterly-budget-2026.md"
    copies = [documents / "Backup" / "quarterly-budget-2026.md", projects / "handover" / "quarterly-budget-2026.md"]
    notes = documents / "notes" / "budget-meeting.md"
    files = {
        budget: "# Quarterly budget 2026\n\nThe quarterly budget for 2026 plans the spending of each team "
                "and the hiring budget.\n",
        notes: "# Budget meeting notes\n\nNotes of the budget meeting: travel is cut, the conference budget stays.\n",
        documents / "recipes" / "tarte-tatin.txt": "Tarte tatin\n\nCaramelise the apples, cover with pastry, "
                                                    "bake and turn over while warm.\n",
        projects / "plan.txt": "Project plan\n\nThe lighthouse restoration starts in spring.\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    # The original is the oldest: it wins the tie in relevance over its copies (index/originals.py).
    os.utime(budget, (time.time() - 86400 * 3,) * 2)
    for n, copy in enumerate(copies, 1):
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(files[budget])
        os.utime(copy, (time.time() - 86400 * n,) * 2)
    failed = documents / "scan.pdf"  # a PDF cut short: a recorded failure (corrupt)
    failed.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog")
    return Corpus(documents, projects, budget, copies, notes, failed)


@pytest.fixture
def daemon(home: Path, corpus: Corpus) -> Iterator[DaemonProcess]:
    d = DaemonProcess(home, [corpus.documents, corpus.projects], extra_config='exclude = ["*.tmp", "node_modules/"]\n')
    d.start()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def tray(qapp: Any, daemon: DaemonProcess) -> Iterator[Any]:
    from deskdex.clients.tray.app import TrayApp

    t = TrayApp(daemon.socket, poll_ms=150)
    try:
        t.start()
        wait_for(lambda: t.error is None, "the tray's first status")
        yield t
    finally:
        t.close()


def wait_for(cond: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
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

    assert QTest.qWaitForWindowExposed(dlg, int(WAIT * 1000))
    name = dlg.findChild(QLineEdit, "fileNameEdit")
    # A user types into the dialog they are looking at. Unfocused (Xvfb has no window manager to
    # activate it), the dialog keeps every directory the typed prefix passed through ("/", "/tmp")
    # selected, and with several selected it never emits fileSelected: the CI failure of stop 10.
    dlg.activateWindow()
    assert QTest.qWaitForWindowActive(dlg, int(WAIT * 1000))
    name.setFocus()
    wait_for(name.hasFocus, "the file name field focused")
    name.clear()
    QTest.keyClicks(name, str(folder))
    assert dlg.selectedFiles() == [str(folder)]
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Open).click()


def screenshot(name: str, widget: Any) -> Path:
    """The X screen as Xvfb holds it (what a user would see), kept in test-artifacts/."""
    from PySide6.QtTest import QTest

    assert QTest.qWaitForWindowExposed(widget, int(WAIT * 1000))
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


def test_search_as_you_type(tray: Any, corpus: Corpus) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.search_window import DEBOUNCE_MS, HTML_ROLE

    opened: list[str] = []
    searched: list[dict[str, Any]] = []  # every search answer the daemon sent the tray

    def answered(ticket: int, result: Any, error: Any) -> None:
        # the filters' counts are asked for in a search of their own after each (filters.py): not counted
        if isinstance(result, dict) and "hits" in result and "facets" not in result:
            searched.append(result)

    tray.caller.finished.connect(answered)
    tray.search_action.trigger()
    w = tray.search_window
    w.opener = opened.append
    assert w.isVisible()
    # A fast typist: events are processed between the keys, 30 ms apart.
    gaps, last = [], time.monotonic()
    for ch in "budget":
        QTest.keyClicks(w.box, ch)
        QTest.qWait(30)
        gaps.append(time.monotonic() - last)
        last = time.monotonic()
    # The answer recorded, not only two rows shown: once a CI run saw two rows while the slot above had
    # recorded no answer yet (the daemon calls in flight were 0 with the debounce timer still to fire).
    wait_for(lambda: searched and w.results.topLevelItemCount() == 2, "the search's answer and two results")
    wait_for(lambda: tray.caller.pool.activeThreadCount() == 0, "the daemon calls in flight")
    # One search for the whole word: the keystrokes were debounced. A machine too busy to type on
    # time (a pause of half the debounce delay or more) may let a search of a prefix through.
    stalls = sum(g >= DEBOUNCE_MS / 2000 for g in gaps[1:])
    assert 1 <= len(searched) <= 1 + stalls, (len(searched), gaps)
    shown = titles(w)
    budget = next(i for i, s in enumerate(shown) if s.startswith("Quarterly budget 2026"))
    assert shown[budget].startswith(f"Quarterly budget 2026 — {corpus.budget}"), shown
    assert shown[budget].endswith("2 duplicates"), shown
    notes = shown[1 - budget]
    assert notes.startswith(f"Budget meeting notes — {corpus.notes}") and "duplicate" not in notes, shown
    # Two rows, and the two copies folded into the first said as such: the daemon's total (4) counts
    # every matching document, and "4 results" above two rows read as if two were missing.
    assert w.info.text() == "2 results (+2 copies)", w.info.text()
    assert "<b>budget</b>" in w.results.topLevelItem(budget).data(0, HTML_ROLE)

    first = w.results.topLevelItem(budget)
    first.setExpanded(True)  # the copies come from the daemon's duplicates op
    wait_for(lambda: first.childCount() == 2, "the copies of the first result")
    assert sorted(first.child(i).text(0) for i in range(2)) == sorted(map(str, corpus.copies))
    print("screenshot:", screenshot("search-window.png", w))

    top = w.results.topLevelItem(0).text(0).split(" — ")[1]  # Enter opens the selected (first) result
    QTest.keyClick(w.box, Qt.Key.Key_Return)
    QTest.keyClick(w.box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert opened == [top, os.path.dirname(top)]

    w.box.clear()
    QTest.keyClicks(w.box, '"tarte')
    wait_for(lambda: "unclosed quote" in w.info.text(), "the daemon's error shown")
    assert w.results.topLevelItemCount() == 0


def test_related_by_meaning_are_marked_and_words_only_leaves_them_out(tray: Any, corpus: Corpus) -> None:
    """Words no document holds still find what is about them (meaning, on by default), marked as
    related; "Words only" searches again by the words alone."""
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.search_window import HTML_ROLE, RELATED_BADGE

    tray.search_action.trigger()
    w = tray.search_window
    assert not w.words_only.isChecked()
    QTest.keyClicks(w.box, "sweet dessert ")  # neither word is in the tarte tatin recipe
    wait_for(lambda: w.results.topLevelItemCount() >= 1, "the related result")
    assert titles(w)[0].startswith("Tarte tatin — ") and titles(w)[0].endswith(RELATED_BADGE), titles(w)
    assert all(h["related"] for h in w.hits())
    assert f"[{RELATED_BADGE}]" in w.results.topLevelItem(0).data(0, HTML_ROLE)
    assert w.info.text() == f"no results, {w.results.topLevelItemCount()} related by meaning", w.info.text()
    w.words_only.click()
    wait_for(lambda: w.info.text() == "no results", "the search by the words alone")
    assert w.results.topLevelItemCount() == 0
    w.box.clear()
    QTest.keyClicks(w.box, "tarte ")  # a word it holds: a result of its own, not related
    wait_for(lambda: w.results.topLevelItemCount() == 1 and w.info.text() == "1 result", "the word's result")
    assert not w.hits()[0]["related"] and RELATED_BADGE not in titles(w)[0]


WINDS = 60  # documents with the word zephyr: more than one page of results (search_window.LIMIT)


@pytest.fixture
def winds(home: Path, tmp_path: Path) -> Iterator[tuple[DaemonProcess, list[Path]]]:
    """A daemon watching WINDS documents about the zephyr and one about something else, each
    made of its own made-up words, so that no two are near-duplicates folded into one result."""
    import random

    folder = tmp_path / "winds"
    folder.mkdir()
    rng = random.Random(17)
    paths = []
    for n in range(WINDS):
        words = ["".join(rng.choice("bcdfghklmnprstvw") + rng.choice("aeiou") for _ in range(3)) for _ in range(40)]
        path = folder / f"wind-{n:02d}.txt"
        path.write_text(f"Wind {n}\n\n{' '.join(words[:20])} zephyr {' '.join(words[20:])}\n")
        paths.append(path)
    (folder / "calm.txt").write_text("Calm\n\nnot a breath of air on the lake today\n")
    d = DaemonProcess(home, [folder])
    d.start()
    try:
        d.wait_for(lambda st: st["documents"] == WINDS + 1, what="every document indexed")
        yield d, paths
    finally:
        d.stop()


def test_typing_a_prefix_paging_and_the_context_menu(qapp: Any, winds: tuple[DaemonProcess, list[Path]]) -> None:
    """`zep` finds the documents with `zephyr` while it is typed; the first LIMIT show and "More
    results" the rest; a result's context menu opens it, opens its folder and copies its path."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from deskdex.clients.tray.app import TrayApp
    from deskdex.clients.tray.search_window import LIMIT, PATH_ROLE

    daemon, paths = winds
    assert daemon.call("search", query="zep", words=True)["total"] == 0  # the query language matches whole words
    t = TrayApp(daemon.socket, poll_ms=3_600_000)
    t.start()
    try:
        w = t.search_window
        opened: list[str] = []
        w.opener = opened.append
        t.search_action.trigger()
        QTest.keyClicks(w.box, "zep")
        wait_for(lambda: w.results.topLevelItemCount() == LIMIT, "the first page")
        assert LIMIT < WINDS
        assert w.info.text() == f"first {LIMIT} results of {WINDS} matching documents", w.info.text()
        assert w.more_button.isVisible() and w.more_button.isEnabled()
        w.more_button.click()
        wait_for(lambda: w.results.topLevelItemCount() == WINDS, "the second page")
        shown = [w.results.topLevelItem(i).data(0, PATH_ROLE) for i in range(WINDS)]
        assert sorted(shown) == sorted(map(str, paths))  # each once: the pages do not overlap
        assert not w.more_button.isVisible()
        assert w.info.text() == f"{WINDS} results", w.info.text()

        QTest.keyClicks(w.box, "hyr ")  # a whole word, ended: as the query language reads it
        wait_for(lambda: w.results.topLevelItemCount() == LIMIT, "the first page of the search for zephyr")
        assert w.more_button.isVisible() and w.info.text() == f"first {LIMIT} results of {WINDS} matching documents"

        item = w.results.topLevelItem(3)
        path = item.data(0, PATH_ROLE)
        w.results.scrollToItem(item)
        w.results.customContextMenuRequested.emit(w.results.visualItemRect(item).center())
        menu = w.menu
        assert menu is not None
        wait_for(menu.isVisible, "the context menu")
        assert w.results.currentItem() is item
        actions = {a.text(): a for a in menu.actions()}
        assert list(actions) == ["Open", "Open containing folder", "Copy path"]
        QApplication.clipboard().clear()
        actions["Copy path"].trigger()
        assert QApplication.clipboard().text() == path
        actions["Open"].trigger()
        actions["Open containing folder"].trigger()
        assert opened == [path, os.path.dirname(path)]
        menu.hide()
    finally:
        t.close()


def test_without_a_daemon_the_window_reads_the_index(qapp: Any, home: Path, daemon: DaemonProcess,
                                                      corpus: Corpus) -> None:
    """The daemon stopped, a search still finds what it indexed, read from the index as `deskdex
    search` does, and the window says so; expanding a hit lists its copies from the index too."""
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.app import TrayApp
    from deskdex.clients.tray.search_window import NO_DAEMON, PATH_ROLE
    from deskdex.paths import Home

    daemon.stop()
    t = TrayApp(daemon.socket, poll_ms=150, data_dir=Home.resolve(str(home)).data_dir)
    t.start()
    try:
        wait_for(lambda: t.state_action.text().startswith("Error"), "the tray's error state")
        w = t.search_window
        t.search_action.trigger()
        QTest.keyClicks(w.box, "budg")
        wait_for(lambda: w.results.topLevelItemCount() == 2, "two results")
        assert w.info.text() == f"2 results (+2 copies) ({NO_DAEMON})", w.info.text()
        # the preview and the filters read the index too
        wait_for(lambda: w.preview.doc is not None and not w.preview.loading() and w.preview.hits, "the preview")
        assert w.preview.current_text().lower().startswith("budg")
        wait_for(lambda: w.filters.items(), "the filters, from the index")
        shown = {w.results.topLevelItem(i).data(0, PATH_ROLE): w.results.topLevelItem(i) for i in range(2)}
        assert set(shown) == {str(corpus.budget), str(corpus.notes)}
        first = shown[str(corpus.budget)]
        first.setExpanded(True)
        wait_for(lambda: first.childCount() == 2, "the copies of the budget, from the index")
        assert sorted(first.child(i).text(0) for i in range(2)) == sorted(map(str, corpus.copies))
        print("screenshot:", screenshot("search-window-no-daemon.png", w))
    finally:
        t.close()

    # No daemon and no index: the window says the daemon is not running, as before.
    t = TrayApp(daemon.socket, poll_ms=3_600_000, data_dir=str(home / "nothing"))
    t.start()
    try:
        QTest.keyClicks(t.search_window.box, "budget")
        wait_for(lambda: "not running" in t.search_window.info.text(), "the error")
    finally:
        t.close()


def test_add_folder_starts_at_home(qapp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder picker opens in the user's home, not in the folder the tray was started from."""
    from deskdex.clients.tray.caller import Caller
    from deskdex.clients.tray.folders_window import FoldersWindow

    ada = tmp_path / "ada"
    ada.mkdir()
    monkeypatch.setenv("HOME", str(ada))
    assert Path.cwd() != ada
    w = FoldersWindow(Caller(str(tmp_path / "nothing.sock")), native_dialog=False)
    try:
        w.add_button.click()
        dlg = w.dialog
        assert dlg is not None and dlg.isVisible()
        assert dlg.directory().absolutePath() == str(ada)
        dlg.reject()
        assert w.dialog is None
    finally:
        w.close()
        w.caller.close()
        w.deleteLater()


def test_pause_and_resume_from_the_menu(tray: Any, daemon: DaemonProcess, corpus: Corpus) -> None:
    assert tray.menu.actions()[2:4] == [tray.search_action, tray.pause_action]
    st = daemon.call("status")
    assert st["documents"] == 6 and st["failed"] == 1 and st["failed_by_reason"] == {"corrupt": 1}, st
    wait_for(lambda: tray.state_action.text() == "Idle: 6 documents, 1 failed", "the daemon's counts in the menu")
    tray.pause_action.trigger()
    wait_for(lambda: tray.state == "paused", "the paused state")
    st = daemon.call("status")
    assert st["paused"] is True and st["state"] == "paused", st
    assert tray.pause_action.text() == "Resume indexing"
    assert "Paused" in tray.tray.toolTip()
    tray.pause_action.trigger()
    wait_for(lambda: tray.state == "idle", "the idle state again")
    st = daemon.call("status")
    assert st["paused"] is False and st["state"] == "idle", st
    tray.status_action.trigger()
    assert tray.status_box is not None and tray.status_box.isVisible()
    text = tray.status_box.text()
    assert "Failed: 1 (corrupt 1)" in text and f"Folders: {corpus.documents}, {corpus.projects}" in text, text


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


def test_closing_waits_for_the_calls_in_flight(qapp: Any, daemon: DaemonProcess) -> None:
    """A daemon that stops answering (stopped here with SIGSTOP: the kernel still accepts the
    connection) holds a call until the socket's timeout. Closing the tray waits for it, so no
    thread of the tray outlives it (it gave up after 3 s, while a call may take 10)."""
    from deskdex.clients.tray.app import TrayApp

    assert daemon.proc is not None
    t = TrayApp(daemon.socket, poll_ms=3_600_000)  # one status call: the first
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        t.start()
        wait_for(lambda: t.caller.pool.activeThreadCount() == 1, "the call in flight")
        start = time.monotonic()
        t.close()
        # None of its pool's threads still runs (Qt's own global pool has threads of the same name
        # in /proc, so the pool is asked).
        assert t.caller.pool.activeThreadCount() == 0, f"closed after {time.monotonic() - start:.1f} s"
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)


def test_folders_and_exclusions_through_the_window(tray: Any, daemon: DaemonProcess, corpus: Corpus,
                                                   tmp_path: Path) -> None:
    """Add a folder with the picker (the daemon watches and indexes it), add an exclusion (its files
    leave the index), remove the folder (its documents leave)."""
    from PySide6.QtTest import QTest

    papers = tmp_path / "Papers"
    (papers / "drafts").mkdir(parents=True)
    thesis = papers / "thesis.txt"
    thesis.write_text("a thesis on the migration of the arctic tern\n")
    (papers / "drafts" / "old.txt").write_text("an old draft about the arctic tern\n")
    w = tray.folders_window
    w.native_dialog = False  # Qt's own dialog, which a test can drive (a native one belongs to the desktop)
    tray.folders_action.trigger()
    wait_for(lambda: w.table.rowCount() == 2 and w.patterns.count() == 2, "the folders and exclusions")
    rows = {w.table.item(r, 0).text(): [w.table.item(r, c).text() for c in (1, 2)] for r in range(2)}
    assert rows == {str(corpus.documents): ["4", "1"], str(corpus.projects): ["2", "0"]}
    assert [w.patterns.item(i).text() for i in range(2)] == ["*.tmp", "node_modules/"]

    w.add_button.click()
    dlg = w.dialog
    assert dlg is not None
    choose_in_picker(dlg, papers)
    wait_for(lambda: w.table.rowCount() == 3, "the new folder listed")
    assert str(papers) in [w.table.item(r, 0).text() for r in range(3)]
    assert str(papers) in [f["path"] for f in daemon.call("watch_list")["folders"]]
    daemon.eventually("tern", [str(thesis), str(papers / "drafts" / "old.txt")])
    print("screenshot:", screenshot("folders-window.png", w))

    QTest.keyClicks(w.pattern_edit, "drafts/")
    QTest.keyClick(w.pattern_edit, "\r")
    wait_for(lambda: w.patterns.count() == 3, "the new exclusion")
    assert daemon.call("exclude_list")["exclude"] == ["*.tmp", "node_modules/", "drafts/"]
    daemon.eventually("tern", [str(thesis)])

    w.confirm = lambda parent, path: True  # the user's "Yes" to the confirmation box
    w.table.selectRow([w.table.item(r, 0).text() for r in range(3)].index(str(papers)))
    w.remove_button.click()
    wait_for(lambda: w.table.rowCount() == 2, "the folder removed")
    assert str(papers) not in [f["path"] for f in daemon.call("watch_list")["folders"]]
    daemon.eventually("tern", [])


def _threads(pid: int) -> list[str]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out.append(Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return out


def _catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for ``sig`` (SigCgt of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def _clients_of(socket_path: str) -> int:
    """Connections to a listening Unix socket, accepted or waiting (/proc/net/unix: the entries with
    its path, but for the listener itself, whose flags say it accepts connections)."""
    lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    return sum(1 for ln in lines if ln.endswith(" " + socket_path) and not int(ln.split()[3], 16) & 0x10000)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sockets and signals are read from /proc (Linux)")
def test_tray_process_runs_until_terminated(xvfb: str, daemon: DaemonProcess) -> None:
    """`deskdex tray` as a real process: with no tray host it shows the search window, calls the daemon
    of its home and runs until SIGTERM, which ends it cleanly. Its call is seen at the daemon's socket:
    the daemon is held stopped (SIGSTOP) meanwhile, so the connection waits there, and no one else
    calls it then."""
    assert daemon.proc is not None
    env = dict(os.environ, DESKDEX_HOME=str(daemon.home))
    wait_for(lambda: _clients_of(daemon.socket) == 0, "the connections of the daemon's start closed")
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    stopped = True
    try:
        proc = subprocess.Popen([sys.executable, "-m", "deskdex.clients.tray"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Up: it has called the daemon, and it handles SIGTERM (before that, SIGTERM kills it outright).
            def up() -> bool:
                return _clients_of(daemon.socket) > 0 and _catches(proc.pid, signal.SIGTERM)

            deadline = time.monotonic() + WAIT
            while not up() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()
            assert up(), (_clients_of(daemon.socket), Path(f"/proc/{proc.pid}/status").read_text())
            os.kill(daemon.proc.pid, signal.SIGCONT)
            stopped = False
            wait_for(lambda: _clients_of(daemon.socket) == 0, "the daemon's answer to the tray")
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    finally:
        if stopped:
            os.kill(daemon.proc.pid, signal.SIGCONT)
    assert proc.returncode == 0, err
    assert "no system tray" in err


def test_missing_extra_says_how_to_install(home: Path) -> None:
    code = "import sys; sys.modules['PySide6'] = None\nfrom deskdex.clients.tray.__main__ import main\nsys.exit(main([]))"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=CLIENT_TIMEOUT,
                       env=dict(os.environ, DESKDEX_HOME=str(home)))
    assert p.returncode == 1
    assert "pip install 'deskdex[tray]'" in p.stderr and "Traceback" not in p.stderr


def test_a_missing_qt_library_fails_with_its_name(xvfb: str, tmp_path: Path) -> None:
    """What a machine without one of Qt's X libraries gets. A library cannot be uninstalled for a
    test: one that Qt's xcb plugin needs is made unloadable instead, by an empty file of its name
    found first on LD_LIBRARY_PATH. Qt aborts the child process; the message names the library,
    and this process goes on."""
    (tmp_path / "libxkbcommon-x11.so.0").write_bytes(b"")
    problem = qt_start_problem(dict(x_env(xvfb), LD_LIBRARY_PATH=str(tmp_path)))
    assert problem is not None
    assert "died of SIGABRT" in problem and "libxkbcommon-x11.so.0" in problem, problem
    assert "packaging/system-deps.sh" in problem
    assert qt_start_problem(x_env(xvfb)) is None  # and with the library in place, Qt starts


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


def _as_qt_shows(text: str, rich: bool) -> str:
    """What Qt shows of ``text`` where it reads HTML when ``rich`` (or, for automatic text, when
    it guesses the text is HTML): the plain text of the rendered document."""
    from PySide6.QtGui import QTextDocument

    if not rich:
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


def test_names_show_as_written_and_overrides_escaped(qapp: Any, tmp_path: Path) -> None:
    """A file name is anyone's to choose: HTML in it is shown as written, not rendered (a tooltip
    reads anything that looks like HTML as HTML), and a bidirectional override is written out so
    that "\\u202egnp.exe" does not pass for "exe.png"; the result still opens the exact file."""
    from PySide6.QtGui import Qt as GuiQt

    from deskdex.clients.tray.caller import Caller
    from deskdex.clients.tray.search_window import HTML_ROLE, PATH_ROLE, SearchWindow

    path = "/home/u/<b>bold</b> \u202egnp.exe"
    w = SearchWindow(Caller(str(tmp_path / "nothing.sock")))
    try:
        item = w._item({"uri": "file:///x", "path": path, "title": "<i>it</i> \u202etitle", "mtime": 0,
                        "size": 1, "snippet": ""})  # type: ignore[typeddict-item]
        tip = item.toolTip(0)
        assert _as_qt_shows(tip, GuiQt.mightBeRichText(tip)) == "/home/u/<b>bold</b> \\u202egnp.exe"
        assert "\u202e" not in item.text(0) and "<i>it</i> \\u202etitle" in item.text(0)
        painted = _as_qt_shows(item.data(0, HTML_ROLE), True)
        assert "<i>it</i> \\u202etitle" in painted and "<b>bold</b> \\u202egnp.exe" in painted
        assert item.data(0, PATH_ROLE) == path
    finally:
        w.close()
        w.deleteLater()


def test_the_status_box_shows_names_as_written(qapp: Any, tmp_path: Path) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import Qt as GuiQt
    from PySide6.QtWidgets import QLabel

    from deskdex.clients.tray.app import TrayApp

    socket = tmp_path / "<b>run</b>" / "deskdex.sock"  # named in the error the box shows
    t = TrayApp(str(socket), poll_ms=3_600_000)
    t.start()
    try:
        wait_for(lambda: t.state_action.text().startswith("Error"), "the error state")
        t.show_status()
        assert t.status_box is not None
        label = t.status_box.findChild(QLabel, "qt_msgbox_label")
        rich = label.textFormat() == Qt.TextFormat.RichText or (
            label.textFormat() == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(label.text()))
        assert "<b>run</b>" in _as_qt_shows(label.text(), rich)
    finally:
        t.close()
