"""The web UI against attacks (docs/web.md "What guards it", issue 30), each a test that fails
without its guard: markup in file names and text (XSS), requests from another origin or without
the CSRF token, no or a wrong token, URLs naming files that are not indexed, `..` and a symlink
swapped in, another account's documents through every endpoint (real accounts, PAM logins on the
system daemon), repeated wrong passwords, huge queries, pages and bodies, and slow clients.

Real parts throughout: a daemon process with its web UI on 127.0.0.1, real files, real Unix
accounts with passwords, httpx and raw sockets as the clients."""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import socket
import subprocess
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from deskdex.paths import path_to_uri

from .accounts import IS_ROOT, Users, set_password
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .web_fixture import TIMEOUT, Web, free_port, start_web

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # daemons, shared by the module

XSS_NAME = "<img src=x onerror=alert(1)>.txt"  # a file name cannot hold '/': no </script> here
XSS_TEXT = "quince <script>alert('text')</script> <img src=x onerror=alert(2)> <b onmouseover=alert(3)>bold</b>\n"
SECRET = b"okapi-secret-7731 root's eyes only\n"
EVIL = "http://evil.example"


# -- the desktop daemon (token mode) ------------------------------------------------------------------
@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    root = tmp_path_factory.mktemp("webattacks")
    docs = root / "docs"
    docs.mkdir()
    (docs / XSS_NAME).write_text(XSS_TEXT)
    (docs / "page.html").write_text("<html><head><title>quince page</title></head><body>quince"
                                    "<script>document.title='owned'</script></body></html>\n")
    (docs / "swap.txt").write_text("quince harmless note to be swapped\n")
    (docs / "hidden.secret").write_bytes(SECRET)  # excluded by the setting: in a watched folder, not indexed
    # Bigger than a download's chunk (256 KiB), with every byte value: served unchanged.
    (docs / "big.txt").write_bytes(b"medlar orchard " * 20_000 + bytes(range(256)) * 64)
    (root / "secret.txt").write_bytes(SECRET)
    w = start_web(root / "home", [docs], extra_config='exclude = ["*.secret"]\n')
    w.daemon.eventually("quince", sorted(str(docs / n) for n in (XSS_NAME, "page.html", "swap.txt")))
    yield w
    w.close()


def docs_of(web: Web) -> Path:
    return Path(web.daemon.home).parent / "docs"


def has_csp(r: httpx.Response) -> None:
    csp = r.headers.get("content-security-policy", "")
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'self'" in csp, r.headers
    assert r.headers.get("x-content-type-options") == "nosniff"


def test_markup_in_names_and_text_is_shown_as_text(web: Web) -> None:
    """Guard: the templates' autoescape (and the CSP header, web/app.py SECURITY_HEADERS)."""
    uri = path_to_uri(str(docs_of(web) / XSS_NAME))
    pages = {
        "search": web.client.get("/", params={"q": "quince"}),
        "results": web.client.get("/results", params={"q": "quince", "typing": "1"}),
        "preview": web.client.get("/doc", params={"uri": uri, "q": "quince"}),
        # a query's error shows the query with a caret under the fault
        "error": web.client.get("/", params={"q": "quince <script>alert(4)</script> AND ("}),
        "similar": web.client.get("/", params={"similar": uri}),
    }
    for name, r in pages.items():
        assert r.status_code == 200, (name, r.text[:1000])
        assert r.headers["content-type"].startswith("text/html")
        has_csp(r)
        for raw in ("<script>alert", "<img src=x onerror", "<b onmouseover"):
            assert raw not in r.text, f"{name}: raw {raw!r} in the page"
    # Markup in the request itself: echoed escaped, or not at all.
    echoed = [web.client.get("/", params={"q": "quince", "similar": '"><script>alert(8)</script>', "sort": "<script>"}),
              web.client.get("/doc", params={"uri": "<script>alert(9)</script>", "q": '"><script>alert(10)</script>'}),
              web.client.get("/file", params={"uri": "<script>alert(11)</script>"})]
    for r in echoed:
        has_csp(r)
        assert "<script>alert" not in r.text, (r.request.url, r.text[:2000])
    assert "&#34;&gt;&lt;script&gt;alert(8)" in echoed[0].text and echoed[1].status_code == 404
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in pages["search"].text  # the name, escaped
    assert "&lt;script&gt;alert(" in pages["results"].text  # the snippet, escaped
    assert "&lt;script&gt;alert(" in pages["preview"].text and "&lt;b onmouseover=alert(3)&gt;" in pages["preview"].text
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in pages["error"].text and 'class="caret"' in pages["error"].text

    # The API's JSON holds the markup as data, never to be sniffed as a page.
    api = web.client.get("/api/search", params={"q": "quince"})
    assert api.headers["content-type"] == "application/json" and api.headers["x-content-type-options"] == "nosniff"

    # An indexed HTML file is never served as a page of this origin, even when asked inline.
    page = path_to_uri(str(docs_of(web) / "page.html"))
    got = web.client.get("/file", params={"uri": page, "inline": "1"})
    assert got.status_code == 200 and got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["content-security-policy"].startswith("sandbox")


def pause_state(web: Web) -> bool:
    paused: bool = web.client.get("/api/status").json()["paused"]
    return paused


def test_a_post_from_another_origin_or_without_the_csrf_token_is_refused(web: Web) -> None:
    """Guards: check_post's Origin/Referer comparison, and its CSRF token comparison."""
    c, token = web.client, {"X-CSRF-Token": web.csrf}
    refused = {
        "api, foreign origin": c.post("/api/pause", headers={**token, "Origin": EVIL}),
        "api, sandboxed frame": c.post("/api/pause", headers={**token, "Origin": "null"}),
        "api, foreign referer": c.post("/api/pause", headers={**token, "Referer": EVIL + "/attack.html"}),
        "api, same port other host": c.post("/api/pause", headers={
            **token, "Origin": web.base.replace("127.0.0.1", "localhost")}),
        "api, no token": c.post("/api/pause", headers={"Origin": web.base}),
        "api, wrong token": c.post("/api/pause", headers={"Origin": web.base, "X-CSRF-Token": "0" * len(web.csrf)}),
        "api watch, no token": c.post("/api/watch", json={"path": str(docs_of(web).parent)}),
        "form, foreign origin": c.post("/status", data={"action": "pause", "csrf": web.csrf}, headers={"Origin": EVIL}),
        "form, no token": c.post("/status", data={"action": "pause"}, headers={"Origin": web.base}),
        "logout, foreign origin": c.post("/logout", data={"csrf": web.csrf}, headers={"Origin": EVIL}),
    }
    for name, r in refused.items():
        assert r.status_code == 403, (name, r.status_code, r.text[:500])
        assert r.json()["error"]["code"] == "forbidden", name
        assert "set-cookie" not in r.headers, name  # the logout did not drop the cookie
    assert pause_state(web) is False
    assert len(web.client.get("/api/watch").json()["folders"]) == 1

    # The same with the token, from this origin: it acts.
    done = c.post("/status", data={"action": "pause", "csrf": web.csrf}, headers={"Origin": web.base})
    try:
        assert done.status_code == 200 and "done: pause" in done.text
        assert pause_state(web) is True
    finally:
        resumed = web.post("/api/resume")
    assert resumed.status_code == 200 and pause_state(web) is False


ENDPOINTS_GET = ["/", "/?q=quince", "/results?q=quince", "/status", "/doc?uri={uri}", "/file?uri={uri}",
                 "/api/search?q=quince", "/api/document?uri={uri}", "/api/duplicates?uri={uri}",
                 "/api/similar?uri={uri}", "/api/status", "/api/watch", "/api/exclude", "/api/openapi.json"]
ENDPOINTS_POST = ["/status", "/api/pause", "/api/resume", "/api/watch", "/api/exclude"]


def test_without_the_token_every_page_and_call_is_refused(web: Web) -> None:
    """Guard: WebApp.session_of's token comparison (and require on every route)."""
    uri = path_to_uri(str(docs_of(web) / "swap.txt"))
    token = web.token
    near = token[:-1] + ("A" if token[-1] != "A" else "B")  # right length, one character off
    ways: dict[str, dict[str, str]] = {
        "nothing": {},
        "wrong cookie": {"Cookie": "deskdex_token=wrong"},
        "near cookie": {"Cookie": f"deskdex_token={near}"},
        "empty cookie": {"Cookie": "deskdex_token="},
        "near bearer": {"Authorization": f"Bearer {near}"},
        "other scheme": {"Authorization": f"Basic {token}"},
    }
    with web.anonymous() as stranger:
        for how, headers in ways.items():
            for path in ENDPOINTS_GET:
                r = stranger.get(path.format(uri=uri), headers=headers)
                assert r.status_code == 401, (how, path, r.status_code)
                assert "quince" not in r.text and "swap.txt" not in r.text, (how, path)
            for path in ENDPOINTS_POST:
                r = stranger.post(path, headers={**headers, "X-CSRF-Token": web.csrf}, data={"action": "pause"})
                assert r.status_code == 401, (how, path, r.status_code)
            assert not stranger.cookies
        for wrong in ("wrong", near, ""):
            r = stranger.get("/", params={"token": wrong})
            assert r.status_code == 401 and "set-cookie" not in r.headers, wrong
        assert stranger.get("/api/status").json()["error"]["code"] == "unauthenticated"
        # The right token in the URL: a cookie only this origin's pages send, and the token leaves the address.
        first = stranger.get("/", params={"token": token})
        assert first.status_code == 303 and first.headers["location"] == "/"
        assert first.headers["referrer-policy"] in ("no-referrer", "same-origin")  # the token goes to no other site
        cookie = first.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        stranger.cookies.clear()
        # The right token, as a script sends it: answered.
        assert stranger.get("/api/status", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert pause_state(web) is False


def refused_without(r: httpx.Response, secrets_: list[bytes]) -> None:
    assert r.status_code in (400, 404), (r.request.url, r.status_code, r.text[:500])
    for s in secrets_:
        assert s not in r.content, (r.request.url, s)


def test_files_outside_the_index_cannot_be_fetched(web: Web) -> None:
    """Guards: /file's path is the index's (looked up by the URI through the document op), never
    the request's; the open does not follow a symlink at the end (O_NOFOLLOW)."""
    docs = docs_of(web)
    passwd_line = Path("/etc/passwd").read_bytes().split(b"\n", 1)[0]
    never = [SECRET, passwd_line, b"root:"]
    uris = ["/etc/shadow", "file:///etc/shadow", "file:///etc/passwd", "file:///tmp/x/../../etc/passwd",
            f"file://{docs}/../secret.txt", f"file://{docs}/%2E%2E/secret.txt", path_to_uri(str(docs.parent / "secret.txt")),
            path_to_uri(str(docs / "hidden.secret")),  # in a watched folder, excluded
            path_to_uri(str(docs / XSS_NAME)) + "/../../secret.txt", "file://localhost/etc/passwd", "../secret.txt"]
    for uri in uris:
        for path in ("/file", "/doc", "/api/document"):
            refused_without(web.client.get(path, params={"uri": uri}), never)

    # An indexed file: its exact bytes, as an attachment.
    big = docs / "big.txt"
    got = web.client.get("/file", params={"uri": path_to_uri(str(big))})
    assert got.status_code == 200 and got.content == big.read_bytes()
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''big.txt"

    # Swapped for a symlink to the secret after it was indexed (indexing paused, so the index still
    # holds it as the text file it was): refused, the secret's bytes in no answer.
    swap = docs / "swap.txt"
    assert web.post("/api/pause").status_code == 200
    try:
        link = docs / "swap.lnk"
        link.symlink_to(docs.parent / "secret.txt")
        os.replace(link, swap)
        uri = path_to_uri(str(swap))
        assert web.client.get("/api/document", params={"uri": uri, "text": "0"}).status_code == 200  # still indexed
        refused_without(web.client.get("/file", params={"uri": uri}), never)
        refused_without(web.client.get("/file", params={"uri": uri, "inline": "1"}), never)
        assert SECRET not in web.client.get("/doc", params={"uri": uri}).content
    finally:
        assert web.post("/api/resume").status_code == 200


def peak_rss(pid: int) -> int:
    """The process's peak resident memory in bytes (VmHWM): what it ever held, not what it holds now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def raw_exchange(port: int, data: bytes, timeout: float = TIMEOUT) -> bytes:
    """``data`` sent on a new connection; the whole answer until the server closes or stops sending."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + _length(got):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def _length(head: bytes) -> int:
    m = re.search(rb"content-length: (\d+)", head, re.I)
    return int(m.group(1)) if m else 0


def test_huge_queries_pages_and_bodies_are_bounded(web: Web) -> None:
    """Guards: the query's bound (the page cuts it to the socket's, which refuses it), the page
    number's clamp to the offset bound, the API's limit and offset bounds, the 64 KiB body bound."""
    c = web.client
    port = int(web.base.rsplit(":", 1)[1])
    huge = "quince " * 15_000  # 105 kB: more than httpx puts in a URL, so sent by hand
    cookie = f"Cookie: deskdex_token={web.token}\r\nHost: 127.0.0.1\r\n".encode()
    answer = raw_exchange(port, f"GET /api/search?q={huge.replace(' ', '+')} HTTP/1.1\r\n".encode() + cookie + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] in ("bad_query", "bad_args") and "4096" in error["message"]
    page = raw_exchange(port, f"GET /?q={huge.replace(' ', '+')} HTTP/1.1\r\n".encode() + cookie + b"\r\n")
    assert page.startswith(b"HTTP/1.1 200 ") and b'id="query-error"' in page and b"4096" in page
    assert len(page) < 30_000  # the query is not echoed whole

    for path in ("/", "/results"):
        r = c.get(path, params={"q": "quince", "page": str(10**9)})
        assert r.status_code == 200 and 'id="query-error"' not in r.text, r.text[:3000]
        r = c.get(path, params={"q": "quince", "page": "-5"})
        assert r.status_code == 200 and 'id="query-error"' not in r.text and 'id="summary"' in r.text
    for name in ("limit", "offset"):
        r = c.get("/api/search", params={"q": "quince", name: str(10**9)})
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_args" and name in r.json()["error"]["message"]

    assert web.daemon.proc is not None
    pid = web.daemon.proc.pid
    before = peak_rss(pid)
    body = b"[" + b'"x", ' * 2_000_000 + b'"x"]'  # 10 MB of JSON
    declared = web.post("/api/watch", content=body, headers={"content-type": "application/json"})
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        for i in range(0, len(body), 1 << 16):
            yield body[i:i + (1 << 16)]
    streamed = web.post("/api/watch", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "too_large"
    form = c.post("/status", content=b"action=pause&csrf=" + web.csrf.encode() + b"&value=" + b"x" * 10_000_000,
                  headers={"content-type": "application/x-www-form-urlencoded", "Origin": web.base})
    assert form.status_code == 413
    grew = peak_rss(pid) - before
    assert grew < 4 << 20, f"the daemon's peak memory grew by {grew / 2**20:.1f} MiB for refused 10 MB bodies"
    assert pause_state(web) is False and len(c.get("/api/watch").json()["folders"]) == 1


def test_slow_clients_do_not_hold_the_server(web: Web) -> None:
    """Guard: web/server.py's _Patient, which closes a connection whose request is not whole in
    HEADER_SECONDS (10 s)."""
    port = int(web.base.rsplit(":", 1)[1])
    stalled = []
    started = time.monotonic()
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            s.sendall(b"GET /api/search?q=quin")  # half a request line, then nothing
            stalled.append(s)
        took = []
        for _ in range(5):
            t = time.monotonic()
            r = web.client.get("/api/search", params={"q": "quince"})
            took.append(time.monotonic() - t)
            assert r.status_code == 200 and r.json()["total"] >= 1
        assert sorted(took)[2] < 2.0, f"searches beside 200 stalled connections took {took}"

        # The server closes each of them after about 10 s: the client reads the end of the stream.
        open_ = {s.fileno(): s for s in stalled}
        deadline = started + 60
        while open_ and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_), [], [], 1.0)
            for fd in ready:
                try:
                    data = open_[fd].recv(4096)
                except ConnectionResetError:
                    data = b""
                if not data or data.startswith(b"HTTP/1.1 4"):
                    del open_[fd]
        closed_after = time.monotonic() - started
        assert not open_, f"{len(open_)} of 200 stalled connections still open after {closed_after:.0f} s"
        assert closed_after >= 9, f"closed after {closed_after:.1f} s: before HEADER_SECONDS?"
    finally:
        for s in stalled:
            s.close()
    assert web.client.get("/api/status").status_code == 200  # still serving


# -- the system daemon with real accounts (PAM logins) ------------------------------------------------
@dataclass
class System:
    daemon: DaemonProcess
    base: str
    users: Users
    root_alias: str
    passwords: dict[str, str]
    secret_uri: str  # b's 0600 file
    copy_uri: str  # its identical copy, 0600 too
    own_uri: str  # a's own file

    def client(self, address: str = "127.0.0.1") -> httpx.Client:
        """A client whose connections come from ``address`` (any of 127/8 reaches the daemon): the
        login limit counts failures per address."""
        return httpx.Client(base_url=self.base, timeout=TIMEOUT,
                            transport=httpx.HTTPTransport(local_address=address))

    def login(self, user: str, address: str = "127.0.0.1") -> tuple[httpx.Client, str]:
        """A client logged in as ``user``, and its CSRF token. The session cookie is Secure, which
        httpx keeps for https only: it is sent by hand, as a browser sends it to 127.0.0.1."""
        c = self.client(address)
        r = c.post("/api/login", json={"user": user, "password": self.passwords[user]})
        assert r.status_code == 200, (user, r.status_code, r.text)
        c.headers["Cookie"] = "deskdex_session=" + session_cookie(r)
        return c, r.json()["csrf"]


def session_cookie(r: httpx.Response) -> str:
    header = r.headers["set-cookie"]
    m = re.match(r"deskdex_session=([^;]+);", header)
    assert m, header
    attributes = {a.strip().lower() for a in header.split(";")[1:]}
    assert {"httponly", "secure", "samesite=strict", "path=/"} <= attributes, header
    return m.group(1)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    if not IS_ROOT:
        pytest.skip("needs root: useradd, chpasswd, the system daemon")
    from .accounts import clients_or_skip

    open_dir = Path(tmp_path_factory.mktemp("websystem"))
    clients_or_skip(open_dir)  # the readable install the system daemon runs from
    users = Users()
    root_alias = f"dxr_{uuid.uuid4().hex[:6]}"
    daemon = None
    try:
        pa, pb = users.create()
        users.add(users.c)
        # root logs in as an account of uid 0 made for the test, leaving root's own password alone
        subprocess.run(["useradd", "-o", "-u", "0", "-g", "0", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin",
                        root_alias], check=True, capture_output=True)
        passwords = {name: secrets.token_urlsafe(12) for name in (users.a, users.b, users.c, root_alias)}
        for name, password in passwords.items():
            set_password(name, password)
        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        ha.chmod(0o755)
        hb.chmod(0o711)  # b's home may be passed through: the files' modes alone keep them b's
        own = ha / "alpha.txt"
        own.write_text("quince alpha orchard notes of a\n")
        os.chown(own, pa.pw_uid, pa.pw_gid)
        words = " ".join(f"ledger{i} salary review" for i in range(150))
        secret, copy, similar = hb / "private.txt", hb / "private copy.txt", hb / "private draft.txt"
        secret.write_text(f"quince zebrawolf salary {words}\n")
        copy.write_text(secret.read_text())
        similar.write_text(f"quince zebrawolf salary {words} draft\n")
        for f in (secret, copy, similar):
            os.chown(f, pb.pw_uid, pb.pw_gid)
            f.chmod(0o600)
        home = open_dir / "home"
        names = ", ".join(json.dumps(n) for n in (users.a, users.b))
        port = free_port()
        daemon = DaemonProcess(home, [], extra_config=f'accounts = [{names}]\nweb = "127.0.0.1:{port}"\n',
                               args=("--system",))
        daemon.start()
        # root's searches: the first reconcile has indexed b's three files and a's one
        daemon.wait_for(lambda _: daemon.call("search", query="zebrawolf", all=True)["total"] == 3
                        and daemon.call("search", query="alpha")["total"] == 1, what="the accounts' files")
        yield System(daemon, f"http://127.0.0.1:{port}", users, root_alias, passwords, path_to_uri(str(secret)),
                     path_to_uri(str(copy)), path_to_uri(str(own)))
    finally:
        if daemon is not None:
            daemon.stop()
        subprocess.run(["userdel", "-f", root_alias], capture_output=True)  # never -r: its home is no home
        users.remove()


def test_an_account_cannot_reach_anothers_documents_through_any_endpoint(system: System) -> None:
    """Guard: every request runs its op as the logged-in account (Server.call with its uid), so the
    socket's rights filter and refusals apply; /file reads only what that op lets it find."""
    a, csrf = system.login(system.users.a)
    b, _ = system.login(system.users.b)
    never = ["zebrawolf", "private.txt", "private copy", "private draft", "ledger7"]
    try:
        # b finds its own (the secret is indexed), a does not, whatever the way.
        assert b.get("/api/search", params={"q": "zebrawolf"}).json()["total"] >= 1
        assert b.get("/file", params={"uri": system.secret_uri}).status_code == 200
        assert a.get("/api/search", params={"q": "alpha"}).json()["total"] == 1  # a's own
        for q in ("zebrawolf", "salary", "quince", "ledger7 OR salary"):
            for path in ("/", "/results"):
                r = a.get(path, params={"q": q})
                assert r.status_code == 200
                body = r.text.replace(f'value="{q}"', "").replace(f"{q} – deskdex", "")  # the query echoed back
                body = body.replace(json.dumps(q)[1:-1], "")
                leaked = [s for s in never if s not in q and s in body]
                assert not leaked, (path, q, leaked, body[:3000])
            found = a.get("/api/search", params={"q": q, "facets": "1", "limit": 100}).json()
            assert all("private" not in h["path"] for h in found["hits"]), found
        assert a.get("/api/search", params={"q": "salary", "facets": "1"}).json()["facets"]["counted"] == 0
        for uri in (system.secret_uri, system.copy_uri):
            for path, params in (("/doc", {"uri": uri, "q": "salary"}), ("/file", {"uri": uri}),
                                 ("/file", {"uri": uri, "inline": "1"}), ("/api/document", {"uri": uri, "q": "salary"}),
                                 ("/api/similar", {"uri": uri}), ("/", {"similar": uri, "q": ""}),
                                 ("/results", {"similar": uri})):
                r = a.get(path, params=params)
                assert r.status_code in (200, 404), (path, r.status_code)
                body = r.text.replace(uri, "").replace(urllib.parse.quote(uri, safe=""), "")  # the request, echoed
                leaked = [s for s in never if s in body]
                assert not leaked, (path, leaked, body[:3000])
            # Refused exactly as a document that is not indexed: nothing tells it exists.
            not_indexed = a.get("/api/document", params={"uri": uri + ".none"}).json()
            assert a.get("/api/document", params={"uri": uri}).json() == not_indexed
            assert a.get("/api/duplicates", params={"uri": uri}).json() == {"paths": []}
        own_status, root_status = a.get("/api/status").json(), system.daemon.call("status")
        assert own_status["documents"] == 1 < root_status["documents"], (own_status, root_status["documents"])
        assert own_status["folders"] == [] and own_status["pid"] is None

        # a may not manage the daemon: the socket's forbidden.
        post = {"X-CSRF-Token": csrf}
        for path, body in (("/api/pause", None), ("/api/watch", {"path": "/tmp"}), ("/api/exclude", {"pattern": "*"})):
            r = a.post(path, json=body, headers=post)
            assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (path, r.text)
        assert a.get("/api/watch").status_code == 403
        r = a.post("/status", data={"action": "pause", "csrf": csrf})
        assert r.status_code == 200 and 'name="action"' not in r.text  # no forms for a; the refusal shown
        assert system.daemon.call("status")["paused"] is False
    finally:
        a.close()
        b.close()

    # root may.
    root, root_csrf = system.login(system.root_alias)
    try:
        assert root.post("/api/pause", headers={"X-CSRF-Token": root_csrf}).json()["paused"] is True
        assert system.daemon.call("status")["paused"] is True
        assert root.post("/api/resume", headers={"X-CSRF-Token": root_csrf}).json()["paused"] is False
        assert 'value="pause"' in root.get("/status").text
    finally:
        root.close()


def test_logout_ends_the_session(system: System) -> None:
    """Guard: Sessions.end at logout (and the CSRF token on the logout itself)."""
    c, csrf = system.login(system.users.a, address="127.0.0.5")
    try:
        assert c.get("/api/search", params={"q": "alpha"}).status_code == 200
        assert c.post("/logout", data={}).status_code == 403  # no CSRF token: a foreign page cannot log one out
        # Nor log one in to an account of its choosing (login CSRF): the origin is checked before the password.
        for path, kw in (("/api/login", {"json": {"user": system.users.a, "password": system.passwords[system.users.a]}}),
                         ("/login", {"data": {"user": system.users.a, "password": system.passwords[system.users.a]}})):
            r = c.post(path, headers={"Origin": EVIL}, **kw)
            assert r.status_code == 403 and "set-cookie" not in r.headers, (path, r.text)
        assert c.get("/api/status").status_code == 200
        out = c.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        # The old cookie, sent again (a copy kept by an attacker, or a browser that ignored the deletion).
        assert c.get("/api/search", params={"q": "alpha"}).status_code == 401
        page = c.get("/")
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
    finally:
        c.close()
    # After a login the form goes to a path of this site only, never to another (an open redirect).
    with system.client("127.0.0.5") as form:
        for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
            r = form.post("/login", data={"user": system.users.a, "password": system.passwords[system.users.a],
                                          "next": target})
            assert r.status_code == 303 and r.headers["location"] == "/", (target, r.headers.get("location"))


def test_sessions_expire_when_unused() -> None:
    """Guard: Sessions.get's expiry (web_session_hours; at least 36 s in the setting, so measured here on
    the class itself with a short lifetime)."""
    from deskdex.web import Account
    from deskdex.web.auth import Sessions

    sessions = Sessions(0.5)
    s = sessions.create(Account(1000, 1000, "someone"))
    for _ in range(4):  # each use moves the expiry on
        time.sleep(0.2)
        assert sessions.get(s.sid) is s
    time.sleep(0.8)
    assert sessions.get(s.sid) is None and len(sessions) == 0
    assert sessions.get("") is None and sessions.get(s.sid + "x") is None


def test_failed_logins_are_limited_per_account_and_per_address(system: System) -> None:
    """Guard: LoginLimiter, counted per account and per address (docs/web.md: 5 failures, then 429)."""
    victim, other = system.users.c, system.users.a
    with system.client("127.0.0.2") as attacker:
        for i in range(5):
            r = attacker.post("/api/login", json={"user": victim, "password": f"guess{i}"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", r.text
        right = attacker.post("/api/login", json={"user": victim, "password": system.passwords[victim]})
        assert right.status_code == 429 and "wait" in right.json()["error"]["message"], right.text
        assert "set-cookie" not in right.headers
        # The address: another account from it waits too, the form as well.
        r = attacker.post("/api/login", json={"user": other, "password": system.passwords[other]})
        assert r.status_code == 429, r.text
        form = attacker.post("/login", data={"user": other, "password": system.passwords[other], "next": "/"})
        assert form.status_code == 429 and "too many failed logins" in form.text
    # The account: from another address too.
    with system.client("127.0.0.3") as elsewhere:
        r = elsewhere.post("/api/login", json={"user": victim, "password": system.passwords[victim]})
        assert r.status_code == 429, r.text
    # Neither: another account from another address logs in.
    c, _ = system.login(other, address="127.0.0.4")
    c.close()
