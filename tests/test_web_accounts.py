"""The system daemon's web UI in a real headless Chromium with two real accounts (useradd, chpasswd,
PAM): each logs in with its password, searches, and finds only what it may read; the other's
private file is refused by URI in the preview and the download; a wrong password is refused;
logging out ends the session, and going back shows nothing."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from deskdex.paths import path_to_uri

from .accounts import IS_ROOT, Users, set_password
from .browser import Browser, browser, want_screenshots  # noqa: F401  (browser: the module's fixture)
from .conftest import ROOT
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .web_fixture import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]


@dataclass
class Site:
    base: str
    users: Users
    passwords: dict[str, str]
    files: dict[str, Path]  # a's and b's private files (0600), and b's file open to all


def _put(path: Path, text: str, owner: pwd.struct_passwd, mode: int) -> Path:
    path.write_text(text)
    os.chown(path, owner.pw_uid, owner.pw_gid)
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if not IS_ROOT:
        pytest.skip("needs root: useradd, chpasswd, the system daemon")
    from .accounts import clients_or_skip

    open_dir = Path(tmp_path_factory.mktemp("webaccounts"))
    clients_or_skip(open_dir)  # the readable install the system daemon runs from
    users = Users()
    daemon = None
    try:
        pa, pb = users.create()
        passwords = {name: secrets.token_urlsafe(12) for name in (users.a, users.b)}
        for name, password in passwords.items():
            set_password(name, password)
        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        ha.chmod(0o711)
        hb.chmod(0o711)
        files = {
            "a": _put(ha / "apricot-a.txt", "apricot jam recipe kept by a alone\n", pa, 0o600),
            "b": _put(hb / "apricot-b.txt", "apricot tart and a salary note of b alone\n", pb, 0o600),
            "shared": _put(hb / "apricot-shared.txt", "apricot harvest dates for everyone\n", pb, 0o644),
        }
        names = ", ".join(json.dumps(n) for n in (users.a, users.b))
        port = free_port()
        daemon = DaemonProcess(open_dir / "home", [], extra_config=f'accounts = [{names}]\nweb = "127.0.0.1:{port}"\n',
                               args=("--system",))
        daemon.start()
        daemon.eventually("apricot", [str(f) for f in files.values()])  # root sees all three
        yield Site(f"http://127.0.0.1:{port}", users, passwords, files)
    finally:
        if daemon is not None:
            daemon.stop()
        users.remove()


def _log_in(browser: Browser, site: Site, user: str, password: str) -> None:
    browser.driver.delete_all_cookies()
    browser.clear_downloads()  # the browser is the module's: what an earlier account downloaded goes
    browser.get(site.base + "/")
    browser.wait(lambda: "/login" in browser.driver.current_url, what="the redirect to the login page")
    browser.find("#user").send_keys(user)
    browser.find("#password").send_keys(password)
    browser.find("#login").click()


def _search(browser: Browser, query: str) -> list[str]:
    box = browser.find("#q")
    box.clear()
    box.send_keys(query + "\n")
    browser.wait(lambda: browser.js("const r = document.getElementById('results');"
                                    "return r.dataset.renderedQuery === arguments[0] && !!r.querySelector('#summary');",
                                    query), what=f"results for {query!r}")
    return sorted(e.text for e in browser.find_all(".hit-list .path"))


def test_a_wrong_password_is_refused(browser: Browser, site: Site) -> None:
    _log_in(browser, site, site.users.a, site.passwords[site.users.a] + "x")
    # PAM takes its time over a wrong password (pam_faildelay): wait for the page it answers.
    assert browser.wait(lambda: browser.find("#login-error").text, what="the login's error") == "wrong name or password"
    if want_screenshots():
        browser.driver.delete_all_cookies()
        browser.get(site.base + "/login")
        browser.screenshot(ROOT / "docs" / "screenshots" / "login.png")
    browser.get(site.base + "/?q=apricot")
    assert "/login" in browser.driver.current_url and "apricot" not in browser.find("main").text


@pytest.mark.parametrize("who", ["a", "b"])
def test_each_account_sees_only_what_it_may_read(browser: Browser, site: Site, who: str) -> None:
    other = "b" if who == "a" else "a"
    user = getattr(site.users, who)
    _log_in(browser, site, user, site.passwords[user])
    browser.wait(lambda: browser.driver.current_url.rstrip("/") == site.base, what="the search page after login")
    assert user in browser.find("nav.account").text
    assert _search(browser, "apricot") == sorted([str(site.files[who]), str(site.files["shared"])])
    assert _search(browser, "salary") == ([str(site.files["b"])] if who == "b" else [])

    # Its own file previews and downloads; the other's private one, asked for by its URI, does not.
    own, theirs = (path_to_uri(str(site.files[k])) for k in (who, other))
    browser.get(site.base + "/doc?" + urllib.parse.urlencode({"uri": own, "q": "apricot"}))
    assert browser.find_all("#doc mark.hit")
    browser.find("a.download").click()
    assert browser.download(site.files[who].name).read_bytes() == site.files[who].read_bytes()
    private = site.files[other].read_text().split()[1]  # 'jam' or 'tart'
    for path in ("/doc", "/file", "/api/document"):
        browser.get(site.base + path + "?" + urllib.parse.urlencode({"uri": theirs, "q": "apricot"}))
        body = browser.find("body").text
        assert "no such document" in body or "not_found" in body, (path, body)
        assert private not in body and site.files[other].name not in body, (path, body)
    assert not (browser.downloads / site.files[other].name).exists()

    # Logging out ends the session: the page it came from, and a new visit, go to the login.
    browser.get(site.base + "/?q=apricot")
    browser.find("nav.account button[type=submit]").click()
    browser.wait(lambda: "/login" in browser.driver.current_url, what="the login page after logout")
    browser.driver.back()
    browser.wait(lambda: "/login" in browser.driver.current_url, what="going back after logout to ask for a login")
    assert "apricot" not in browser.find("main").text
    browser.get(site.base + "/api/search?q=apricot")
    assert "unauthenticated" in browser.find("body").text
