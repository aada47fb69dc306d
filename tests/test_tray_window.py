"""The tray's search window under Xvfb, against one real `deskdex daemon` (tests/daemon_fixture.py) on
real files shared by the module's tests: a three-page PDF (made with fpdf2), notes in Markdown with a
copy in a backup folder, a French text, each of another year and size.

What is checked is what a user sees: the preview's text and its highlighted hits, next/previous
moving between them, the page of a PDF's hit and "Open at page", the filters' counts (as the daemon
counts them) narrowing the results, the order by date, the history across a restart of the window,
and the count above the results matching the rows listed. Xvfb, the X server, the Qt platform, the
daemon and the icon theme are real; a document viewer cannot be installed here, so "Open at page" is
checked with a stand-in `evince` (a script recording its arguments) named the default PDF viewer in
an XDG mimeapps.list, through the real xdg-mime.

With DESKDEX_SCREENSHOTS=1 the screenshots for docs/screenshots/ (tray-*.png) are written too."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from .conftest import DESKDEX, ROOT
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .test_first_contact import HOW_FAR, building  # noqa: F401  (building: a daemon in its first index)
from .test_tray import ARTIFACTS, qapp, wait_for, xvfb  # noqa: F401  (qapp, xvfb: the session's fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]

SCREENSHOTS = ROOT / "docs" / "screenshots"


def year(y: int) -> float:
    return time.mktime((y, 6, 15, 12, 0, 0, 0, 0, -1))


@dataclass
class Library:
    daemon: DaemonProcess
    pdf: Path  # birds.pdf: kingfisher on page 3 only
    notes: Path  # kingfisher three times; 2019; its copy in backup/
    copy: Path
    french: Path  # 2022
    folder: Path
    tmp: Path


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    from fpdf import FPDF

    tmp = tmp_path_factory.mktemp("window")
    home, folder = tmp / "home", tmp / "library"
    (folder / "papers").mkdir(parents=True)
    (folder / "backup").mkdir()
    home.mkdir()
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in ("Herons stand still in the reeds.", "Bitterns boom at dusk over the marsh.",
                 "The kingfisher dives from a low branch into the river."):
        pdf.add_page()
        pdf.multi_cell(w=0, text=f"{text} " + "Nothing else happens on this page. " * 20)
    paths = folder / "papers" / "birds.pdf", folder / "papers" / "river-notes.md", folder / "backup" / "river-notes.md"
    paths[0].write_bytes(bytes(pdf.output()))
    notes = ("# River notes\n\nA kingfisher flew past the mill at seven. Later the kingfisher came back with a "
             "fish, and a second kingfisher called from the far bank. The water was low and clear all morning, "
             "the alders along the bank were full of finches and a heron fished below the weir.\n")
    for p in paths[1:]:
        p.write_text(notes)
    french = folder / "papers" / "martin-pecheur.txt"
    french.write_text("Le martin-pêcheur (kingfisher en anglais) plonge depuis une branche basse dans la rivière. "
                      "Il niche dans les berges sablonneuses et se nourrit de petits poissons pendant toute "
                      "l'année, même quand l'eau est froide et que les jours sont courts.\n" * 3)
    os.utime(paths[0], (year(2025),) * 2)
    os.utime(paths[1], (year(2019),) * 2)
    os.utime(paths[2], (year(2019) + 86400,) * 2)  # the later one is the copy
    os.utime(french, (year(2022),) * 2)
    d = DaemonProcess(home, [folder])
    d.start()
    try:
        d.wait_for(lambda st: st["documents"] == 4 and not st["queue"], what="every document indexed")
        yield Library(d, paths[0], paths[1], paths[2], french, folder, tmp)
    finally:
        d.stop()


@pytest.fixture
def window(qapp: Any, library: Library, tmp_path: Path) -> Iterator[Any]:  # noqa: F811
    from deskdex.clients.tray.caller import Caller
    from deskdex.clients.tray.history import History
    from deskdex.clients.tray.search_window import SearchWindow

    caller = Caller(library.daemon.socket)
    w = SearchWindow(caller, opener=lambda p: None, history=History(str(tmp_path / "history.json")))
    w.show()
    try:
        yield w
    finally:
        wait_for(lambda: not caller.busy(), "the last answer")
        w.close()
        caller.close()
        w.deleteLater()


def search(w: Any, query: str) -> None:
    from PySide6.QtTest import QTest

    w.box.clear()
    QTest.keyClicks(w.box, query)
    w.timer.stop()
    w.search_now()  # at once, not after the debounce
    wait_for(lambda: not w.caller.busy() and w.results.topLevelItemCount(), f"results of {query}")


def row_of(w: Any, path: Path) -> Any:
    from deskdex.clients.tray.search_window import PATH_ROLE

    for i in range(w.results.topLevelItemCount()):
        if w.results.topLevelItem(i).data(0, PATH_ROLE) == str(path):
            return w.results.topLevelItem(i)
    raise AssertionError(f"{path} not listed: {[w.results.topLevelItem(i).text(0) for i in range(w.results.topLevelItemCount())]}")


def shoot(w: Any, name: str, popup: Any = None) -> None:
    """The window as Qt paints it (QWidget.grab), with ``popup`` (a menu: a window of its own) drawn
    where it shows, into test-artifacts/ and, when asked, docs/screenshots/ (in 256 colours: a few
    tens of KB)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtTest import QTest

    wait_for(lambda: not w.caller.busy() and not w.preview.loading(), "the window's answers")
    QTest.qWait(150)
    img = w.grab().toImage()
    if popup is not None:
        painter = QPainter(img)
        painter.drawImage(w.mapFromGlobal(popup.mapToGlobal(popup.rect().topLeft())), popup.grab().toImage())
        painter.end()
    ARTIFACTS.mkdir(exist_ok=True)
    assert img.save(str(ARTIFACTS / name))
    if os.environ.get("DESKDEX_SCREENSHOTS") == "1":
        # without dithering: flat areas stay flat and compress (dithered, the file was twice the size)
        small = img.convertToFormat(QImage.Format.Format_Indexed8, Qt.ImageConversionFlag.ThresholdDither
                                    | Qt.ImageConversionFlag.AvoidDither)
        assert small.save(str(SCREENSHOTS / name), "PNG", 0)


def test_preview_highlights_every_hit_and_moves_between_them(window: Any, library: Library) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QIcon, QTextCursor
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.preview import MARK

    w = window
    search(w, "kingfisher ")
    # each row with its type's icon from the icon theme (Adwaita here: the test machine has no desktop)
    icons = {path.suffix: row_of(w, path).icon(0) for path in (library.pdf, library.notes)}
    assert not any(i.isNull() for i in icons.values())
    if QIcon.hasThemeIcon("x-office-document") and QIcon.hasThemeIcon("text-x-generic"):
        assert (icons[".pdf"].name(), icons[".md"].name()) == ("x-office-document", "text-x-generic")
    w.results.setCurrentItem(row_of(w, library.notes))
    p = w.preview
    wait_for(lambda: p.doc is not None and p.doc["path"] == str(library.notes) and not p.loading(), "the notes' preview")
    text = library.notes.read_text()
    assert p.text.toPlainText().replace("\u2029", "\n").strip() == "River notes\n" + text.split("\n", 2)[2].strip()
    # every kingfisher of the text highlighted, nothing else
    assert len(p.hits) == text.lower().count("kingfisher") == 3
    for start, end, page in p.hits:
        cur = QTextCursor(p.text.document())
        cur.setPosition(start)
        cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        assert cur.selectedText().lower() == "kingfisher"
        cur.setPosition(start + 1)
        assert cur.charFormat().background().color() == MARK
        assert page is None  # Markdown has no pages
    assert p.current == 0 and p.position.text() == "hit 1 of 3"
    starts = [h[0] for h in p.hits]
    p.next_button.click()
    assert p.current == 1 and p.text.textCursor().position() == starts[1] and p.position.text() == "hit 2 of 3"
    assert p.text.extraSelections()[0].cursor.selectionStart() == starts[1]  # the current one coloured
    QTest.keyClick(w.box, Qt.Key.Key_F3)
    assert p.current == 2 and p.current_text().lower() == "kingfisher"
    p.next_button.click()  # past the last: the first again
    assert p.current == 0
    p.previous_button.click()
    assert p.current == 2 and p.text.textCursor().position() == starts[2]
    assert not p.page_button.isVisible()
    shoot(w, "tray-preview.png")

    # The PDF's hit is on page 3: its row says so, the preview starts at it and offers to open there.
    pdf_row = row_of(w, library.pdf)
    assert " — page 3" in pdf_row.text(0), pdf_row.text(0)
    w.results.setCurrentItem(pdf_row)
    wait_for(lambda: p.doc is not None and p.doc["path"] == str(library.pdf) and not p.loading(), "the PDF's preview")
    assert [h[2] for h in p.hits] == [3] and p.current_text().lower() == "kingfisher"
    assert p.position.text() == "hit 1 of 1 · page 3"
    assert "— page 3 —" in p.text.toPlainText() and "— page 1 —" in p.text.toPlainText()
    assert p.page_button.isVisible() and p.page_button.text() == "Open at page 3"


def test_open_at_page_with_the_default_viewer(window: Any, library: Library, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Evince named the default PDF viewer (mimeapps.list, read by the real xdg-mime) gets the page;
    where the default is a viewer deskdex knows no page argument of, the default application opens."""
    from deskdex.clients.tray import viewers

    if not shutil.which("xdg-mime"):
        pytest.skip("xdg-mime is not installed (xdg-utils)")
    record = tmp_path / "evince-args.json"
    bin_dir, config, data = tmp_path / "bin", tmp_path / "config", tmp_path / "data"
    for d in (bin_dir, config, data / "applications"):
        d.mkdir(parents=True)
    # the stand-in viewer: records its arguments (a real Evince cannot be installed here)
    fake = bin_dir / "evince"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}.tmp && mv {record}.tmp {record}\n")
    fake.chmod(0o755)
    (data / "applications" / "org.gnome.Evince.desktop").write_text(
        "[Desktop Entry]\nType=Application\nName=Document Viewer\nExec=evince %U\nMimeType=application/pdf;\n")
    (config / "mimeapps.list").write_text("[Default Applications]\napplication/pdf=org.gnome.Evince.desktop\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.setenv("XDG_CURRENT_DESKTOP", "X-Generic")
    assert viewers.default_app("application/pdf") == "org.gnome.Evince.desktop"
    assert viewers.page_viewer("application/pdf") == "evince"

    w = window
    opened: list[str] = []
    w.opener = opened.append
    search(w, "kingfisher ")
    w.results.setCurrentItem(row_of(w, library.pdf))
    wait_for(lambda: w.preview.doc is not None and w.preview.doc["path"] == str(library.pdf)
             and not w.preview.loading(), "the PDF's preview")
    w.preview.page_button.click()
    wait_for(record.exists, "the viewer started", timeout=20)
    assert record.read_text().splitlines() == ["--page-index=3", str(library.pdf)]
    assert opened == []
    # another default viewer: the default application, at the start
    (config / "mimeapps.list").write_text("[Default Applications]\napplication/pdf=firefox.desktop\n")
    (data / "applications" / "firefox.desktop").write_text(
        "[Desktop Entry]\nType=Application\nName=Firefox\nExec=firefox %U\nMimeType=application/pdf;\n")
    menu = w.context_menu(row_of(w, library.pdf))
    actions = {a.text(): a for a in menu.actions()}
    actions["Open at page 3"].trigger()
    assert opened == [str(library.pdf)]


def test_filters_show_the_daemons_counts_and_narrow(window: Any, library: Library) -> None:
    from PySide6.QtCore import Qt

    from deskdex.clients.tray.filters import FILTER_ROLE

    w = window
    search(w, "kingfisher ")
    assert w.results.topLevelItemCount() == 3
    assert w.info.text() == "3 results (+1 copy)", w.info.text()  # four files match; one is a copy
    wait_for(lambda: w.filters.items(), "the filters")
    facets = library.daemon.call("search", query="kingfisher", limit=1, facets=True)["facets"]
    listed = {i.data(0, FILTER_ROLE): i.text(0) for i in w.filters.items()}
    wanted = {v["filter"]: f"{v['value']} ({v['count']:,})" for k in ("type", "folder", "year", "lang")
              for v in facets[k]}
    assert listed == wanted
    assert listed["after:2019 before:2020"] == "2019 (2)"  # the notes and their copy
    assert listed["type:pdf"] == "pdf (1)"
    headings = [w.filters.topLevelItem(i).text(0) for i in range(w.filters.topLevelItemCount())]
    assert headings[:3] == ["Type", "Folder", "Date"], headings

    y2019 = next(i for i in w.filters.items() if i.data(0, FILTER_ROLE) == "after:2019 before:2020")
    y2019.setCheckState(0, Qt.CheckState.Checked)
    wait_for(lambda: w.results.topLevelItemCount() == 1 and not w.caller.busy(), "one row")
    assert w.info.text() == "1 result (+1 copy)", w.info.text()  # the filter's 2: one row and its copy
    assert row_of(w, library.notes)
    wait_for(lambda: any(i.checkState(0) == Qt.CheckState.Checked for i in w.filters.items()), "the filter shown")
    checked = [i.data(0, FILTER_ROLE) for i in w.filters.items() if i.checkState(0) == Qt.CheckState.Checked]
    assert checked == ["after:2019 before:2020"]
    shoot(w, "tray-filters.png")
    # the box's words stay the user's; the filter goes along with them
    assert w.box.text() == "kingfisher " and w._query == "kingfisher after:2019 before:2020"
    pdf = next(i for i in w.filters.items() if i.data(0, FILTER_ROLE) == "after:2019 before:2020")
    pdf.setCheckState(0, Qt.CheckState.Unchecked)
    wait_for(lambda: w.results.topLevelItemCount() == 3, "the three rows again")


def test_sort_by_date_and_size(window: Any, library: Library) -> None:
    from deskdex.clients.tray.search_window import HIT_ROLE

    w = window
    search(w, "kingfisher ")

    def listed() -> list[dict[str, Any]]:
        return [w.results.topLevelItem(i).data(0, HIT_ROLE) for i in range(w.results.topLevelItemCount())]

    for key, field in (("date", "mtime"), ("size", "size")):
        w.sort.setCurrentIndex(w.sort.findData(key))
        wait_for(lambda: not w.caller.busy() and len(listed()) == 3, f"sorted by {key}")
        values = [h[field] for h in listed()]
        assert values == sorted(values, reverse=True), (key, values)
    w.sort.setCurrentIndex(w.sort.findData("date"))
    wait_for(lambda: not w.caller.busy() and len(listed()) == 3, "sorted by date")
    # 2025, 2022, 2019 (by date, the group of the notes and their copy shows its newest: the copy)
    assert [os.path.basename(h["path"]) for h in listed()] == ["birds.pdf", "martin-pecheur.txt", "river-notes.md"]


    # the notes' group listed whole ("Show N similar" does this): each copy a row, none folded, so
    # the count is of rows alone
    w.show_similar(listed()[2])
    wait_for(lambda: not w.caller.busy() and len(listed()) == 2, "the notes and their copy")
    assert sorted(h["path"] for h in listed()) == sorted(map(str, (library.notes, library.copy)))
    assert w.info.text() == "2 results", w.info.text()


def test_history_is_kept_across_a_restart_of_the_window(qapp: Any, library: Library,  # noqa: F811
                                                        tmp_path: Path) -> None:
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    from deskdex.clients.tray.caller import Caller
    from deskdex.clients.tray.history import History
    from deskdex.clients.tray.search_window import SETTLE_MS, SearchWindow

    file = tmp_path / "state" / "tray-history.json"
    caller = Caller(library.daemon.socket)
    try:
        first = SearchWindow(caller, opener=lambda p: None, history=History(str(file)))
        first.show()
        for q in ("heron", "bittern", "kingfisher"):
            QTest.keyClicks(first.box, q)
            wait_for(lambda q=q: file.exists() and q in json.loads(file.read_text())["queries"],
                     f"{q} remembered", timeout=SETTLE_MS / 1000 + 30)
            first.box.clear()
        QTest.keyClicks(first.box, "kingf")  # typed over before it settles: not kept
        QTest.qWait(200)
        wait_for(lambda: not caller.busy(), "the last answer")
        first.close()
        first.deleteLater()
        assert json.loads(file.read_text())["queries"] == ["kingfisher", "bittern", "heron"]

        again = SearchWindow(caller, opener=lambda p: None, history=History(str(file)))
        again.show()
        try:
            completer = again.box.completer()
            completer.setCompletionPrefix("king")
            assert completer.completionCount() == 1 and completer.currentCompletion() == "kingfisher"
            again.history_menu.aboutToShow.emit()  # as opening the menu does
            labels = [a.text() for a in again.history_menu.actions() if a.text()]
            assert labels == ["kingfisher", "bittern", "heron", "Clear history"]
            again.history_menu.actions()[1].trigger()  # bittern, from the menu
            assert again.box.text() == "bittern"
            wait_for(lambda: again.results.topLevelItemCount() == 1, "the search of bittern")
            again.box.clear()
            QTest.keyClicks(again.box, "i")  # the queries with an i offered as it is typed
            wait_for(lambda: again.box.completer().popup().isVisible(), "the completer's popup")
            popup = again.box.completer().popup()
            offered = [popup.model().index(i, 0).data() for i in range(popup.model().rowCount())]
            assert sorted(offered) == ["bittern", "kingfisher"], offered
            again.box.setText("bittern")
            wait_for(lambda: again.results.topLevelItemCount() == 1 and again.preview.doc is not None
                     and not again.preview.loading(),
                     "the search of bittern again")
            # where the button drops it: below, its right edge at the button's (the window's edge)
            corner = again.history_button.mapToGlobal(again.history_button.rect().bottomRight())
            again.history_menu.popup(corner - QPoint(again.history_menu.sizeHint().width(), 0))
            wait_for(again.history_menu.isVisible, "the history menu")
            shoot(again, "tray-history.png", again.history_menu)
            again.history_menu.hide()
        finally:
            wait_for(lambda: not caller.busy(), "the last answer")
            again.close()
            again.deleteLater()
    finally:
        caller.close()


def test_a_search_during_the_first_index_says_how_far_it_is(qapp: Any, building: Any) -> None:  # noqa: F811
    """A daemon in its first index (tests/test_first_contact.py's, resting with most files to do): the
    window says the index is being built and how far, with the results and without any."""
    from deskdex.clients.tray.caller import Caller
    from deskdex.clients.tray.search_window import SearchWindow

    daemon, _ = building
    caller = Caller(daemon.socket)
    w = SearchWindow(caller, opener=lambda p: None)
    w.show()
    try:
        search(w, "kestrel ")
        line = w.info.text()
        # "3 results (...)", or with more than a page committed so far "first 50 results of 120 ... (...)"
        shown = re.fullmatch(r"(?:first )?([\d,]+) results?.* \(the index is being built: .*; more may match when "
                             r"it is done\)", line)
        assert shown and int(shown[1].replace(",", "")) == w.results.topLevelItemCount(), line
        m = HOW_FAR.search(line)
        assert m and int(m[1].replace(",", "")) < int(m[2].replace(",", "")), line
        w.box.setText("zeppelinnotthere")
        w.timer.stop()
        w.search_now()
        wait_for(lambda: not caller.busy() and w.info.text().startswith("no results yet: the index is being built: "),
                 "the empty answer")
        assert w.info.text().endswith("; more may match when it is done"), w.info.text()
        assert daemon.call("status")["state"] == "indexing"  # still: the premise held throughout
    finally:
        wait_for(lambda: not caller.busy(), "the last answer")
        w.close()
        caller.close()
        w.deleteLater()


def test_the_count_says_what_is_listed() -> None:
    from deskdex.clients.render import count_line

    assert count_line(1, 0, 1, False) == "1 result"
    assert count_line(1, 1, 2, False) == "1 result (+1 copy)"  # not "2 results" above one row
    assert count_line(5, 1, 6, False) == "5 results (+1 copy)"  # not "5 of 6"
    assert count_line(50, 3, 1200, True) == "first 50 results (+3 copies) of 1,200 matching documents"
    assert count_line(0, 0, 0, False) == "no results"


def test_a_history_file_that_cannot_be_read_or_written_costs_the_history_only(tmp_path: Path,
                                                                               caplog: pytest.LogCaptureFixture) -> None:
    from deskdex.clients.tray.history import History

    broken = tmp_path / "tray-history.json"
    broken.write_text('{"queries": ["ok", 3, ')  # cut short
    h = History(str(broken))
    assert h.queries == [] and "not read" in caplog.text
    assert h.add("heron") and json.loads(broken.read_text()) == {"queries": ["heron"]}  # a new one replaces it
    assert not h.add(" heron ")  # the same query again: no change
    h2 = History(str(broken), keep=3)
    for q in ("a", "b", "c", "d", "b"):
        h2.add(q)
    assert h2.queries == ["b", "d", "c"] == History(str(broken)).queries
    blocked = tmp_path / "file"
    blocked.write_text("")
    h3 = History(str(blocked / "tray-history.json"))  # a file where its folder should be
    assert h3.add("kingfisher") and h3.queries == ["kingfisher"]  # kept for this run
    assert "not saved" in caplog.text


def test_a_second_tray_hands_its_search_to_the_running_one(qapp: Any, library: Library,  # noqa: F811
                                                          xvfb: str, tmp_path: Path) -> None:  # noqa: F811
    """`deskdex tray --search QUERY` (the desktop's "show all", clients/shellsearch.py) with a tray
    of the daemon running: the installed command hands the query to that tray and exits, and the
    running tray's search window shows it (a query may begin with "-"); a malformed request is
    logged and changes nothing."""
    from PySide6.QtNetwork import QLocalSocket

    from deskdex.clients.tray.app import Instance, TrayApp, instance_name
    from deskdex.clients.tray.search_window import PATH_ROLE

    from .test_tray import x_env

    tray = TrayApp(library.daemon.socket, history_file=str(tmp_path / "history.json"))
    name = instance_name(library.daemon.socket)
    instance = Instance(name, tray.search_for)
    try:
        query = "-papers kingfisher"
        start = time.monotonic()
        p = subprocess.Popen([DESKDEX, "tray", "--home", str(library.daemon.home), f"--search={query}"],
                             env=x_env(xvfb), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while p.poll() is None and time.monotonic() - start < 60:
            qapp.processEvents()  # the running tray answers from this loop
            time.sleep(0.01)
        out, err = p.communicate(timeout=5)
        assert p.returncode == 0, err
        w = tray.search_window
        wait_for(lambda: w.box.text() == query and w.isVisible() and not w.caller.busy()
                 and w.results.topLevelItemCount(), "the handed-over search")
        # The query whole, its "-papers" too: the notes in papers/ left out, their copy in backup/ found.
        assert [w.results.topLevelItem(i).data(0, PATH_ROLE)
                for i in range(w.results.topLevelItemCount())] == [str(library.copy)]
        # Not JSON, then a search that is not a string: both refused, the window unchanged.
        for junk in (b"not json\n", b'{"search": 42}\n'):
            sock = QLocalSocket()
            sock.connectToServer(name)
            assert sock.waitForConnected(1000)
            sock.write(junk)
            sock.waitForBytesWritten(1000)
            deadline = time.monotonic() + 1
            while time.monotonic() < deadline:
                qapp.processEvents()
            sock.abort()
        assert w.box.text() == query
    finally:
        instance.close()
        wait_for(lambda: not tray.caller.busy(), "the last answer")
        tray.close()
