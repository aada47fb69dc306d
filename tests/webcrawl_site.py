"""A generated web site on 127.0.0.1 for the crawler's tests and benchmarks, logging every request.

    with SiteServer(kind="main") as site:   # also "topic" (focused crawling), "big" (speed)
        site.url("/")                       # http://127.0.0.1:PORT/
        site.log                            # [(monotonic time, method, path, headers)]

"main" has robots.txt (one path disallowed, a gzipped sitemap index), pages with ETags and
Last-Modified, an RSS feed with ttl, a page only the sitemap names, a calendar trap, session ids,
near-duplicate pages, a slow page, a huge page, an image, a redirect loop, malformed HTML, bytes
that are not the declared encoding, a page that answers 429 with Retry-After once, and (linked
from nowhere) ``/trickle``, which sends its body one byte every ``trickle_seconds``.
"redirect" answers every path but robots.txt with a 301 to the same path on ``redirect_to``, as a
bare domain does to its www. host (robots.txt: 404, so no ``Sitemap:`` line).
"""

from __future__ import annotations

import gzip
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

LM = "Mon, 01 Jan 2024 00:00:00 GMT"
TOPIC_WORDS = "telescope galaxy orbit planet comet nebula astronomy star observatory eclipse".split()
OTHER_WORDS = "recipe flour butter oven garlic pasta kitchen sauce baking dinner".split()
FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()


def html(title: str, body: str, head: str = "") -> bytes:
    return (f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head>"
            f"<body><nav><a href='/'>home</a></nav><main><h1>{title}</h1>{body}</main></body></html>").encode()


class SiteServer:
    def __init__(self, kind: str = "main", pages: int = 20, crawl_delay: float | None = None,
                 slow_seconds: float = 3.0, seed: int = 1, redirect_to: str = "",
                 trickle_seconds: float = 0.05) -> None:
        self.kind, self.pages, self.crawl_delay, self.slow_seconds = kind, pages, crawl_delay, slow_seconds
        self.redirect_to, self.trickle_seconds = redirect_to.rstrip("/"), trickle_seconds
        self.links_to: list[str] = []  # "big": other sites' roots, each page linking to their page of its number
        self.log: list[tuple[float, str, str, dict[str, str]]] = []
        self.version: dict[str, int] = {}  # path -> content version (tests bump it to change a page)
        self._lock = threading.Lock()
        self._busy_seen: set[str] = set()
        self._closing = threading.Event()  # ends a trickle under way
        self._tricklers: list[threading.Thread] = []  # joined on exit: no thread outlives the site
        self.seed = seed
        self._rng = random.Random(seed)
        self._topic_pages = self._make_topic_site() if kind == "topic" else {}
        self.server = _Server(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="webcrawl-site", daemon=True)

    def __enter__(self) -> "SiteServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        with self._lock:
            tricklers = list(self._tricklers)
        for t in tricklers:
            t.join(5)
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        return f"http://{self.netloc}{path}"

    def paths(self, method: str | None = None) -> list[str]:
        with self._lock:
            return [p for _, m, p, _ in self.log if method is None or m == method]

    def record(self, method: str, path: str, headers: dict[str, str]) -> None:
        with self._lock:
            self.log.append((time.monotonic(), method, path, headers))

    # The "topic" site: 60 pages, half about astronomy; pages link mostly to pages of their own topic.
    def _make_topic_site(self) -> dict[str, tuple[bool, list[str]]]:
        rng = self._rng
        pages: dict[str, tuple[bool, list[str]]] = {}
        on = [f"/t/{i}" for i in range(self.pages)]
        topical = set(rng.sample(on, self.pages // 3))
        for p in on:
            same = [q for q in on if (q in topical) == (p in topical) and q != p]
            other = [q for q in on if (q in topical) != (p in topical)]
            pages[p] = (p in topical, rng.sample(same, 3) + rng.sample(other, 1))
        home_links = sorted(rng.sample(sorted(topical), 2) + rng.sample(sorted(set(on) - topical), 4))
        pages["/"] = (False, home_links)
        return pages

    def respond(self, method: str, raw_path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        if self.kind == "topic":
            return self._topic(path)
        if self.kind == "big":
            return self._big(path)
        if self.kind == "redirect":
            if path == "/robots.txt":
                return 404, {"Content-Type": "text/plain"}, b"not found"
            return 301, {"Location": self.redirect_to + raw_path}, b""
        return self._main(path, query, headers)

    def _topic(self, path: str) -> tuple[int, dict[str, str], bytes]:
        if path not in self._topic_pages:
            return 404, {}, b"not found"
        on, links = self._topic_pages[path]
        words = TOPIC_WORDS if on else OTHER_WORDS
        rng = random.Random(path)
        text = " ".join(rng.choice(words + FILLER) for _ in range(80))
        body = f"<p>{text}</p>" + "".join(f"<p><a href='{q}'>more</a></p>" for q in links)
        return 200, {"Content-Type": "text/html"}, html(path, body)

    def _big(self, path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/":
            path = "/p/0"
        if not path.startswith("/p/"):
            return 404, {}, b"not found"
        i = int(path[3:]) if path[3:].isdigit() else -1
        if not 0 <= i < self.pages:
            return 404, {}, b"not found"
        links = "".join(f"<li><a href='/p/{(i * 7 + k) % self.pages}'>page {k}</a></li>" for k in range(1, 6))
        links += "".join(f"<li><a href='{other}p/{i}'>elsewhere</a></li>" for other in self.links_to)
        rng = random.Random(f"{self.seed}-{i}")  # distinct text per page and per site: no near-duplicates
        text = " ".join(rng.choice(FILLER) + str(rng.randrange(50)) for k in range(300))
        return 200, {"Content-Type": "text/html; charset=utf-8"}, html(f"Page {i}", f"<p>{text}</p><ul>{links}</ul>")

    def _main(self, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        h = {"Content-Type": "text/html; charset=utf-8"}
        if path == "/robots.txt":
            delay = f"Crawl-delay: {self.crawl_delay}\n" if self.crawl_delay else ""
            return 200, {"Content-Type": "text/plain"}, (
                f"User-agent: *\nDisallow: /private/\n{delay}Sitemap: {self.url('/sitemap_index.xml.gz')}\n").encode()
        if path == "/":
            links = [f"/page/{i}" for i in range(self.pages)] + [
                "/private/secret", "/calendar?month=0", "/session?sid=abc", "/session?sid=def", "/slow", "/huge",
                "/image", "/loop1", "/badenc", "/malformed", "/busy", "/dup1", "/dup2", "/page/0#section",
                "/a/../page/1", "mailto:someone@example.org", "http://10.0.0.1/internal"]
            body = "".join(f"<p><a href='{link}'>link {link}</a></p>" for link in links)
            return 200, h, html("Home", body, "<link rel='alternate' type='application/rss+xml' href='/feed.xml'>")
        if path.startswith("/page/"):
            v = self.version.get(path, 0)
            etag = f'"{path}-v{v}"'
            if headers.get("if-none-match") == etag:
                return 304, {"ETag": etag}, b""
            n = path.rsplit("/", 1)[-1]
            body = f"<p>Page {n} version {v}: {' '.join(FILLER)} number {n}.</p><p><a href='/page/{n}'>self</a></p>"
            return 200, {**h, "ETag": etag, "Last-Modified": LM}, html(f"Page {n}", body)
        if path == "/private/secret":
            return 200, h, html("Secret", "<p>robots.txt forbids this</p>")
        if path == "/sitemap_index.xml.gz":
            xml = (f"<?xml version='1.0'?><sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                   f"<sitemap><loc>{self.url('/sitemap-pages.xml')}</loc></sitemap></sitemapindex>")
            return 200, {"Content-Type": "application/gzip"}, gzip.compress(xml.encode())
        if path == "/sitemap-pages.xml":
            xml = ("<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                   f"<url><loc>{self.url('/hidden/only-in-sitemap')}</loc><lastmod>2024-01-01</lastmod>"
                   "<changefreq>daily</changefreq><priority>0.9</priority></url></urlset>")
            return 200, {"Content-Type": "application/xml"}, xml.encode()
        if path == "/hidden/only-in-sitemap":
            return 200, h, html("Hidden", "<p>Only the sitemap links here, about sitemaps and hidden pages.</p>")
        if path == "/feed.xml":
            items = "".join(f"<item><title>News {i}</title><link>{self.url(f'/news/{i}')}</link>"
                            f"<pubDate>Mon, 0{i} Jan 2024 00:00:00 GMT</pubDate></item>" for i in (1, 3, 2))
            rss = f"<?xml version='1.0'?><rss version='2.0'><channel><title>News</title><ttl>30</ttl>{items}</channel></rss>"
            return 200, {"Content-Type": "application/rss+xml"}, rss.encode()
        if path.startswith("/news/"):
            return 200, h, html(f"News {path[6:]}", f"<p>News item {path[6:]} with its own words {path[6:] * 3}.</p>")
        if path == "/calendar":
            m = int(query.get("month", ["0"])[0])
            return 200, h, html(f"Month {m}", f"<p>Month {m} of an endless calendar.</p>"
                                f"<a href='/calendar?month={m + 1}'>next month</a>")
        if path == "/session":
            return 200, h, html("Session", "<p>A page with a session id in its URL, the same for every id.</p>")
        if path == "/slow":
            time.sleep(self.slow_seconds)
            return 200, h, html("Slow", "<p>late</p>")
        if path == "/trickle":
            return 200, h, Trickle(html("Trickle", "<p>" + "slow " * 80 + "</p>"), self.trickle_seconds)
        if path == "/huge":
            return 200, h, b"<html><body><p>" + b"x" * (3 * 2**20) + b"</p></body></html>"
        if path == "/image":
            return 200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n" + b"\0" * 100
        if path in ("/loop1", "/loop2"):
            return 302, {"Location": "/loop2" if path == "/loop1" else "/loop1"}, b""
        if path == "/badenc":
            return 200, h, b"<html><body><p>Caf\xe9 cr\xe8me br\xfbl\xe9e, not UTF-8 at all: \xff\xfe\x80.</p></body></html>"
        if path == "/malformed":
            return 200, h, b"<html><body><p>unclosed <b>bold <a href='/page/2'>still a link<div></table></p><<<>>"
        if path == "/busy":
            with self._lock:
                first = path not in self._busy_seen
                self._busy_seen.add(path)
            if first:
                return 429, {"Retry-After": "1"}, b"slow down"
            return 200, h, html("Busy", "<p>Busy page, answered after backing off.</p>")
        if path in ("/dup1", "/dup2"):
            text = " ".join(f"{w}{i}" for i, w in enumerate(FILLER * 20))
            extra = "Tuesday" if path == "/dup2" else "Monday"
            return 200, h, html("Duplicate", f"<p>{text}</p><p>{extra}</p>")
        return 404, {"Content-Type": "text/plain"}, b"not found"


class Trickle(bytes):
    """A body sent one byte at a time, ``interval`` seconds apart (a server that never quite stalls)."""

    def __new__(cls, data: bytes, interval: float) -> "Trickle":
        self = super().__new__(cls, data)
        self.interval = interval
        return self


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up (timeouts, size caps) are what the tests provoke


def _handler(site: SiteServer) -> Any:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # headers and body in one send: no 40 ms delayed-ACK stall on keep-alive

        def _serve(self, method: str) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            site.record(method, self.path, headers)
            status, h, body = site.respond(method, self.path, headers)
            self.send_response(status)
            for k, v in h.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if method != "HEAD" and status != 304:
                try:
                    if isinstance(body, Trickle):
                        with site._lock:
                            site._tricklers.append(threading.current_thread())
                        self.close_connection = True  # the thread ends with this answer
                        self.wfile.flush()  # the headers now, the body byte by byte
                        for i in range(len(body)):
                            if site._closing.wait(body.interval):
                                break
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
