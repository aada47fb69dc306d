"""A real daemon with its web UI on 127.0.0.1 (token mode: the desktop's), and an HTTP client that
holds the token's cookie as a browser does after its first visit; for tests/test_web_api.py and
tests/test_web_attacks.py."""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .daemon_fixture import DaemonProcess
from .servers import free_port  # noqa: F401 - the tests of the web UI take it from here

TIMEOUT = 60.0  # an HTTP request's wall-clock guard: the daemon answers at once, a busy machine slows it


@dataclass
class Web:
    daemon: DaemonProcess
    url: str  # with the token, as web.json has it
    base: str  # http://127.0.0.1:PORT (no slash)
    client: httpx.Client  # has the token's cookie
    csrf: str  # the CSRF token of the page's <meta name="csrf">

    @property
    def token(self) -> str:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.url).query)["token"][0]

    def anonymous(self, **kw: Any) -> httpx.Client:
        """A client without the cookie (another local account's browser, a script)."""
        return httpx.Client(base_url=self.base, timeout=TIMEOUT, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        """A POST as the page's script sends it: the cookie, the CSRF header, this origin."""
        headers = {"X-CSRF-Token": self.csrf, "Origin": self.base, **kw.pop("headers", {})}
        return self.client.post(path, headers=headers, **kw)

    def close(self) -> None:
        self.client.close()
        self.daemon.stop()


def csrf_of(html: str) -> str:
    m = re.search(r'<meta name="csrf" content="([^"]+)">', html)
    assert m, "the page carries no CSRF token:\n" + html[:2000]
    return m.group(1)


def start_web(home: Path, folders: list[Path], extra_config: str = "") -> Web:
    """A daemon on ``home`` watching ``folders``, its first reconcile done, its web UI opened with
    the token; the caller closes it (``Web.close``)."""
    d = DaemonProcess(home, folders, extra_config='web = "127.0.0.1:0"\n' + extra_config).start()
    try:
        url = json.loads((home / "run" / "web.json").read_text())["url"]
        base = url.split("/?", 1)[0]
        client = httpx.Client(base_url=base, timeout=TIMEOUT)
        first = client.get(url)
        assert first.status_code == 303, first.text
        page = client.get("/")
        assert page.status_code == 200, page.text
        return Web(d, url, base, client, csrf_of(page.text))
    except BaseException:
        d.stop()
        raise
