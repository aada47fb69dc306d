"""`deskdex web` and the daemon's setting web, through the installed console script: the address
with its token, the browser opened, what a running daemon without the page says, and an idle
daemon with the page on that does not wake (uvicorn's 10 Hz tick is gone: web/server.py)."""

from __future__ import annotations

import json
import os
import signal
import ssl
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import DESKDEX, ROOT
from .daemon_fixture import DaemonProcess

pytestmark = pytest.mark.slow


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("a list of quinces and medlars\n")
    return docs


def _start_web(home: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([DESKDEX, "web", *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("deskdex web: "):
            return proc, line.split(": ", 1)[1].strip()
    proc.kill()
    raise AssertionError("deskdex web printed no address:\n" + "".join(lines))


def _env(home: Path, **more: str) -> dict[str, str]:
    return dict(os.environ, DESKDEX_HOME=str(home), NO_COLOR="1", **more)


def test_deskdex_web_runs_a_daemon_with_the_page_and_opens_the_browser(tmp_path: Path):
    home, docs = tmp_path / "home", _docs(tmp_path)
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f"folders = [{json.dumps(str(docs))}]\n")
    # The browser `webbrowser` runs is the one $BROWSER names: here a script that writes down its address.
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\nprintf '%s' \"$1\" > {opened}\n")
    browser.chmod(0o755)
    proc, url = _start_web(home, _env(home, BROWSER=str(browser)))
    try:
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        deadline = time.monotonic() + 30
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert opened.read_text() == url
        served = home / "run" / "web.json"
        assert stat.S_IMODE(served.stat().st_mode) == 0o600
        base = url.split("?", 1)[0]

        # Without the token: refused; with it: a cookie, and the page.
        assert httpx.get(base).status_code == 401
        assert httpx.get(base + "api/search?q=quinces").status_code == 401
        with httpx.Client() as browser_like:
            first = browser_like.get(url)
            assert first.status_code == 303 and first.headers["location"] == "/"
            page = browser_like.get(base)
            assert page.status_code == 200 and 'id="q"' in page.text
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                hits = browser_like.get(base + "api/search", params={"q": "quinces"}).json()
                if hits.get("total"):
                    break
                time.sleep(0.5)
            assert [h["path"] for h in hits["hits"]] == [str(docs / "notes.txt")]

        # A second `deskdex web` finds the running daemon's page: the same address, and it exits.
        again = subprocess.run([DESKDEX, "web", "--no-browser"], cwd=ROOT, env=_env(home), capture_output=True,
                               text=True, timeout=60)
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == f"deskdex web: {url}"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert not (home / "run" / "web.json").exists()  # a stopped daemon leaves no address behind


def test_a_daemon_without_the_page_says_how_to_have_one(tmp_path: Path):
    docs = _docs(tmp_path)
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        p = subprocess.run([DESKDEX, "web", "--no-browser"], cwd=ROOT, env=_env(d.home), capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 1
        assert "serves no web page" in p.stderr and "web = " in p.stderr
    finally:
        d.stop()


def test_a_users_daemon_serves_loopback_only_and_says_so_in_status(tmp_path: Path):
    d = DaemonProcess(tmp_path / "home", [_docs(tmp_path)], extra_config='web = "0.0.0.0:0"\n').start()
    try:
        problems = d.call("status")["settings_problems"]
        assert any("127.0.0.1 only" in p for p in problems), problems
        assert not (d.home / "run" / "web.json").exists()
        assert d.search("quinces")  # the daemon itself runs on
    finally:
        d.stop()


def _switches(pid: int) -> int:
    """Context switches of the daemon's threads but tantivy's own (named ``thread-tantivy-*``), which
    wake a few times a second for up to a minute after the index is opened or searched, with or
    without the web (docs/web.md): the uvicorn server runs on a Python thread, counted here."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().startswith("thread-tantivy"):
                continue
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
        except OSError:
            pass  # a thread that just ended
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_idle_daemon_with_the_page_on_does_not_wake(tmp_path: Path):
    d = DaemonProcess(tmp_path / "home", [_docs(tmp_path)], extra_config='web = "127.0.0.1:0"\n').start()
    try:
        url = json.loads((d.home / "run" / "web.json").read_text())["url"]
        assert d.proc is not None
        with httpx.Client() as c:  # a visit, so the server has run the paths it takes
            c.get(url)
            assert c.get(url.split("?")[0] + "status").status_code == 200
            assert c.get(url.split("?")[0] + "api/search?q=quinces").json()["total"] == 1
        time.sleep(6)  # the keep-alive connection's timer (5 s) has run out, the search's commit is done
        before = _switches(d.proc.pid)
        time.sleep(5)
        woke = _switches(d.proc.pid) - before
        # uvicorn's own main loop alone would switch 50 times in 5 s.
        assert woke <= 2, f"the idle daemon's threads switched {woke} times in 5 s"
    finally:
        d.stop()


def test_the_page_over_https_with_tls_cert_and_tls_key(tmp_path: Path):
    """tls_cert/tls_key serve the page over HTTPS (the system daemon needs it off loopback); the
    token's cookie is Secure then."""
    from .test_shards import _certificate

    cert, key = _certificate(tmp_path)
    config = f'web = "127.0.0.1:0"\ntls_cert = {json.dumps(str(cert))}\ntls_key = {json.dumps(str(key))}\n'
    d = DaemonProcess(tmp_path / "home", [_docs(tmp_path)], extra_config=config).start()
    try:
        url = json.loads((d.home / "run" / "web.json").read_text())["url"]
        assert url.startswith("https://127.0.0.1:")
        with httpx.Client(verify=ssl.create_default_context(cafile=str(cert))) as c:
            first = c.get(url)
            assert first.status_code == 303
            assert "secure" in first.headers["set-cookie"].lower()
            assert c.get(url.split("?")[0] + "api/status").status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the same port is not served
            httpx.get(url.replace("https://", "http://"), timeout=5)
    finally:
        d.stop()
