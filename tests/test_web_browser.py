"""The web UI end to end in a real headless Chromium (tests/browser.py) against a real desktop
daemon with the page on (token mode, docs/web.md): the token, search as you type with highlighted
words, a query error with its caret, the preview's jumps between hits, a facet, sorting, paging, a
download, the keyboard, and file names and text with HTML shown as text."""

from __future__ import annotations

import http.server
import json
import random
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from .browser import Browser, browser, want_screenshots  # noqa: F401  (browser: the module's fixture)
from .conftest import ROOT
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]

SCREENSHOTS = ROOT / "docs" / "screenshots"
XSS_NAME = "<img src=x onerror=alert(1)>.txt"
VOCABULARY = ("apple", "barley", "cider", "damson", "elder", "fennel", "garlic", "hazel", "iris", "juniper",
              "kale", "lemon", "mint", "nettle", "onion", "parsley", "radish", "sorrel", "thyme", "walnut")
XSS_TEXT = "rhubarb <script>alert('boo')</script> <b id=injected>bold</b> rhubarb\n"


def test_the_helper_drives_chromium_on_a_local_page(browser: Browser, tmp_path: Path) -> None:
    """The helper itself, on a page of http.server: it loads, runs its script, and downloads."""
    (tmp_path / "index.html").write_text("<title>plain</title><p id=p>before</p>"
                                         "<script>document.getElementById('p').textContent = 'after'</script>")
    (tmp_path / "data.bin").write_bytes(bytes(range(256)) * 10)
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="http.server")
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        browser.get(base + "index.html")
        assert browser.driver.title == "plain"
        assert browser.wait(lambda: browser.find("#p").text == "after", what="the page's script")
        browser.js("const a = document.createElement('a'); a.href = '/data.bin'; a.download = 'data.bin';"
                   "document.body.append(a); a.click();")
        assert browser.download("data.bin").read_bytes() == bytes(range(256)) * 10
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- a desktop daemon with the page on -------------------------------------------------------------

def _corpus(docs: Path) -> dict[str, Path]:
    """Files with known words: 'kumquat' in 25 (more than a page of 20) of two types and sizes,
    'quince' six times in one long text (the preview's hits), HTML in a name and a text."""
    docs.mkdir()
    rng = random.Random(30)
    files: dict[str, Path] = {}
    for i in range(25):
        # Words drawn at random: texts alike would be collapsed as near-copies into one hit.
        words = " ".join(rng.choice(VOCABULARY) for _ in range(20 + 15 * i))
        if i % 5 == 0:  # 5 web pages among 20 texts: the type facet's counts
            f = docs / f"fruit{i:02d}.html"
            f.write_text(f"<html><body><p>kumquat number {i}</p><p>{words}</p></body></html>\n")
        else:
            f = docs / f"fruit{i:02d}.txt"
            f.write_text(f"kumquat number {i}\n{words}\n")
        files[f.name] = f
    long = docs / "orchard.txt"
    paras = [f"Paragraph {n} of the orchard notes, about pears and plums." for n in range(60)]
    for n in (3, 15, 27, 39, 48, 57):
        paras[n] += " A quince tree grows here."
    long.write_text("\n\n".join(paras) + "\n")
    files["orchard"] = long
    notes = docs / "notes.txt"
    notes.write_text("a list of medlars and loquats, été\n", encoding="utf-8")
    files["notes"] = notes
    xss = docs / XSS_NAME
    xss.write_text(XSS_TEXT)
    files["xss"] = xss
    return files


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, str, dict[str, Path]]]:
    """The daemon, the URL with its token (from RUNTIME_DIR/web.json), and its files, all indexed."""
    tmp = tmp_path_factory.mktemp("web")
    files = _corpus(tmp / "docs")
    d = DaemonProcess(tmp / "home", [tmp / "docs"], extra_config='web = "127.0.0.1:0"\n').start()
    try:
        d.eventually("kumquat", [str(files[f"fruit{i:02d}.{'html' if i % 5 == 0 else 'txt'}"]) for i in range(25)])
        d.eventually("quince", [str(files["orchard"])])
        d.eventually("rhubarb", [str(files["xss"])])
        d.eventually("medlars", [str(files["notes"])])
        url = json.loads((d.home / "run" / "web.json").read_text())["url"]
        yield d, url, files
    finally:
        d.stop()


def _base(url: str) -> str:
    return url.split("?", 1)[0]


def _type(browser: Browser, text: str) -> None:
    box = browser.find("#q")
    box.clear()
    box.send_keys(text)


def _shown(browser: Browser, query: str) -> bool:
    """The results of ``query`` are in the page (the script sets these once it has rendered them)."""
    return bool(browser.js("const r = document.getElementById('results');"
                           "return r.dataset.renderedQuery === arguments[0] && !!r.querySelector('#summary, #query-error');",
                           query))


def _titles(browser: Browser) -> list[str]:
    """The file names of the hits shown, in order (from their path lines: a text's title is its first line)."""
    return [e.text.rsplit("/", 1)[-1] for e in browser.find_all(".hit-list .path")]


def test_without_the_token_every_page_is_refused(browser: Browser, served) -> None:
    _, url, _ = served
    browser.driver.delete_all_cookies()
    for path in ("", "doc?uri=x", "status", "api/search?q=kumquat"):
        browser.get(_base(url) + path)
        body = browser.find("body").text
        assert "kumquat" not in body and "fruit" not in body, path
        assert "token" in body, (path, body)  # the denied page, or the API's unauthenticated error
    browser.get(_base(url) + "?token=wrong" + url.rsplit("=", 1)[1][:4])
    assert "needs its token" in browser.find("body").text
    assert browser.driver.get_cookies() == []


def test_search_as_you_type_highlights_and_shows_errors_with_the_caret(browser: Browser, served) -> None:
    _, url, files = served
    browser.get(url)  # the token becomes a cookie and leaves the address bar
    assert browser.driver.current_url == _base(url)
    assert [c["name"] for c in browser.driver.get_cookies()]
    _type(browser, "quinc")  # unfinished: matched as a prefix while typing
    browser.wait(lambda: _shown(browser, "quinc"), what="results for 'quinc'")
    assert _titles(browser) == ["orchard.txt"]
    marks = [m.text.lower() for m in browser.find_all(".hit .snippet mark")]
    assert marks and all(m.startswith("quince") for m in marks), marks
    if want_screenshots():
        _type(browser, "kumquat")
        browser.wait(lambda: _shown(browser, "kumquat"), what="results for 'kumquat'")
        browser.screenshot(SCREENSHOTS / "search.png")

    _type(browser, "quince AND (pears")
    browser.wait(lambda: _shown(browser, "quince AND (pears"), what="the query's error")
    error = browser.find("#query-error")
    caret = error.find_element("css selector", "pre.caret").get_attribute("textContent")
    line, marker = caret.split("\n")[:2]
    assert line == "quince AND (pears"
    assert marker.endswith("^") and error.text.strip()
    assert "(" in line[len(marker) - 3:len(marker) + 3], (line, marker)  # the caret points near the parenthesis


def test_facet_sort_and_pages(browser: Browser, served) -> None:
    _, url, files = served
    browser.get(url)
    _type(browser, "kumquat\n")  # Enter: at once, no prefix
    browser.wait(lambda: _shown(browser, "kumquat"), what="results for 'kumquat'")
    assert browser.find("#summary").get_attribute("data-total") == "25"
    assert len(_titles(browser)) == 20 and "page 1 of 2" in browser.find("nav.pager").text

    browser.find("nav.pager a[rel=next]").click()
    browser.wait(lambda: "page 2 of 2" in browser.find("nav.pager").text, what="page 2")
    second = _titles(browser)
    assert len(second) == 5
    browser.find("nav.pager a[rel=prev]").click()
    browser.wait(lambda: "page 1 of 2" in browser.find("nav.pager").text, what="page 1 again")
    assert not set(second) & set(_titles(browser))

    # Sort by size: the largest first (each fruitNN file is larger than the one before).
    from selenium.webdriver.support.select import Select

    Select(browser.find("#sort")).select_by_value("size")
    browser.wait(lambda: _titles(browser)[:3] == ["fruit24.txt", "fruit23.txt", "fruit22.txt"], what="sorted by size")

    # The web pages' facet: its count is what the narrowed query finds. The script asks for the facets
    # right after the hits are shown.
    browser.wait(lambda: any(a.text == "web" for a in browser.find_all(".facet[data-facet=type] a.facet-link")),
                 what="the facets")
    link = next(a for a in browser.find_all(".facet[data-facet=type] a.facet-link") if a.text == "web")
    count = int(link.find_element("xpath", "following-sibling::span[@class='count']").text)
    assert count == 5
    link.click()
    browser.wait(lambda: browser.find("#summary").get_attribute("data-total") == "5", what="the facet's results")
    assert sorted(_titles(browser)) == [f"fruit{i:02d}.html" for i in (0, 5, 10, 15, 20)]
    assert "kumquat" in browser.find("#q").get_attribute("value")


def test_preview_jumps_between_hits_and_keyboard(browser: Browser, served) -> None:
    from selenium.webdriver.common.keys import Keys

    _, url, files = served
    browser.get(url)
    _type(browser, "quince\n")
    browser.wait(lambda: _shown(browser, "quince"), what="results for 'quince'")
    # Keyboard: Down from the box focuses the first hit, Enter opens its preview.
    browser.find("#q").send_keys(Keys.ARROW_DOWN)
    assert browser.js("return document.activeElement.classList.contains('title')")
    browser.driver.switch_to.active_element.send_keys(Keys.ENTER)
    browser.wait(lambda: "/doc?" in browser.driver.current_url, what="the preview")
    marks = browser.find_all("#doc mark.hit")
    assert len(marks) == 6 and browser.find("#hit-count").text == "6 hits"

    def current() -> str:
        return str(browser.js("const m = document.querySelector('#doc mark.current'); return m ? m.id : ''"))
    assert current() == "hit-1"  # the first hit is shown at once
    browser.find("#next-hit").click()
    assert current() == "hit-2" and "hit 2 of 6" in browser.find("#hit-where").text
    browser.find("#prev-hit").click()
    browser.find("#prev-hit").click()
    assert current() == "hit-6"  # round from the first to the last
    browser.find("body").send_keys("n")  # the key n: the next hit
    assert current() == "hit-1"
    if want_screenshots():
        browser.find("#next-hit").click()
        browser.screenshot(SCREENSHOTS / "preview.png")


def test_download_is_the_original_file(browser: Browser, served) -> None:
    _, url, files = served
    browser.get(url)
    _type(browser, "medlars\n")
    browser.wait(lambda: _shown(browser, "medlars"), what="results for 'medlars'")
    browser.find(".hit a.download").click()
    got = browser.download("notes.txt")
    assert got.read_bytes() == files["notes"].read_bytes()


def test_html_in_names_and_text_is_shown_as_text(browser: Browser, served) -> None:
    _, url, files = served
    browser.get(url)
    _type(browser, "rhubarb\n")
    browser.wait(lambda: _shown(browser, "rhubarb"), what="results for 'rhubarb'")
    assert _titles(browser) == [XSS_NAME]
    assert "<script>alert('boo')</script>" in browser.find(".hit .snippet").text
    browser.find(".hit a.title").click()
    browser.wait(lambda: "/doc?" in browser.driver.current_url, what="the preview")
    assert browser.find(".doc-head .path").text == str(files["xss"])
    assert "<b id=injected>bold</b>" in browser.find(".doc-text").text
    _nothing_ran(browser, "the preview")
    browser.driver.back()
    browser.wait(lambda: _titles(browser) == [XSS_NAME], what="the results again")
    _nothing_ran(browser, "the results")


def _nothing_ran(browser: Browser, page: str) -> None:
    """No element the text would have made as HTML, no inline script, no alert."""
    from selenium.common.exceptions import NoAlertPresentException

    assert not browser.find_all("#injected, img[src=x], script:not([src])"), page
    with pytest.raises(NoAlertPresentException):
        browser.driver.switch_to.alert.accept()


def test_a_response_is_not_held_back_by_nagle(served) -> None:
    """Guard: the listening socket names IPPROTO_TCP (web/server.py), so asyncio sets TCP_NODELAY on
    each connection. Without it a response's body, written after its headers, waited for the client's
    delayed ACK: 40 ms at least on Linux for every request on a kept-alive connection (measured: API
    search median 66 ms against 41 ms for the socket's). A busy machine makes requests slower, never
    faster, so the fastest of 20 under 30 ms tells the two apart."""
    import socket

    _, url, _ = served
    host, port = _base(url).split("//")[1].rstrip("/").split(":")
    token = url.rsplit("token=", 1)[1]
    times = []
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(20):
            started = time.perf_counter()
            s.sendall(f"GET /api/status HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
                chunk = s.recv(65536)
                assert chunk, data
                data += chunk
            times.append((time.perf_counter() - started) * 1000)
            assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert min(times) < 30, sorted(times)


def _length(response: bytes) -> int:
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    return next(int(line.split(":", 1)[1]) for line in head.split("\r\n") if line.startswith("content-length:"))
