"""HTTP fetching: one httpx client for every host, a DNS cache that also refuses private addresses,
a size cap, a deadline per request (a read timeout alone lets a server that trickles one byte at
a time hold a crawl for ever), redirects followed by hand (each hop checked, loops caught, each
through its site's politeness gate) and per-URL outcomes.

Every failure becomes a ``FetchError`` with a short ``reason`` that the crawl records and counts;
nothing here stops a crawl. The DNS cache decides where a request connects: each request goes to
an address the cache resolved and checked, so the address that was checked is the address
connected to: a name cannot resolve to a public address for the check and to 127.0.0.1 for the
connection. Only httpx's public interface does it (a transport of ours around httpx's own, and
the documented ``sni_hostname`` request extension); see CheckedTransport.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import socket
import ssl
import time
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable

import httpx

from deskdex.errors import FetchError

from .sink import FetchedPage, KnownPage
from .urls import is_public_address, normalise, site_of

logger = logging.getLogger(__name__)


REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class FetchSettings:
    user_agent: str = "deskdex-crawler/0.1 (+https://github.com/deskdex/deskdex)"
    timeout: float = 10.0  # to connect, and between two reads of an answer
    deadline: float = 60.0  # for one whole request, its body included
    max_bytes: int = 10 * 2**20
    max_redirects: int = 5
    allow_private: bool = False
    dns_ttl: float = 300.0


class PrivateAddress(httpx.ConnectError):
    """A name resolves to an address a crawl may not reach (loopback, private, link-local...)."""


class DNSCache:
    """Host name -> addresses, kept ``ttl`` seconds, with the private-address rule applied."""

    def __init__(self, ttl: float, allow_private: bool) -> None:
        self.ttl = ttl
        self.allow_private = allow_private
        self._cache: dict[str, tuple[float, list[str]]] = {}
        self.lookups = 0

    async def lookup(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` from the system's resolver, in its order (a subclass may
        answer from elsewhere: a static table, a test's names)."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise httpx.ConnectError(f"DNS: {exc}") from exc
        return list(dict.fromkeys(str(i[4][0]) for i in infos))

    async def resolve(self, host: str, port: int) -> list[str]:
        hit = self._cache.get(host)
        if hit and hit[0] > time.monotonic():
            addrs = hit[1]
        else:
            self.lookups += 1
            addrs = await self.lookup(host, port)
            self._cache[host] = (time.monotonic() + self.ttl, addrs)
        if not self.allow_private:
            bad = [a for a in addrs if not is_public_address(a)]
            if bad:
                raise PrivateAddress(f"{host} resolves to a non-public address {bad[0]}")
        return addrs


KEEPALIVE = 5.0  # seconds an idle connection, and an idle site's pool, is kept


@dataclass(eq=False)
class _SitePool:
    transport: httpx.AsyncHTTPTransport
    busy: int = 0  # requests whose answer is not closed yet
    used: float = field(default_factory=time.monotonic)


class CheckedTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, told which address to connect to. httpx takes no resolver, so each
    request is sent to an address the DNS cache resolved and checked, as httpx documents for
    connecting to an explicit address: the URL's host replaced by the address, the name kept in
    the Host header and given for TLS (the ``sni_hostname`` extension: the certificate is checked
    against the name). The addresses are tried in turn until one connects.

    Each site (scheme, name, port) has its own pool, as when httpx resolves names itself: a TLS
    connection verified for one name never carries the request of another name that has the same
    address. At most ``connections`` requests at once, their bodies included; a site's pool idle
    KEEPALIVE seconds is closed, and the least recently used idle ones when ``connections`` sites
    hold one, so a crawl of many sites keeps no more sockets than a shared pool would."""

    def __init__(self, dns: DNSCache, connections: int, verify: ssl.SSLContext) -> None:
        self.dns = dns
        self.connections = connections
        self.verify = verify
        self._sites: dict[tuple[str, str, int], _SitePool] = {}  # least recently used first
        self._slots = asyncio.Semaphore(connections)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} URLs are not crawled", request=request)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addrs = await self.dns.resolve(url.host, port)
        except httpx.ConnectError as exc:
            exc.request = request
            raise
        await self._slots.acquire()
        site: _SitePool | None = None
        try:
            site, idle = self._site((url.scheme, url.host, port))
            for old in idle:
                await old.transport.aclose()
            response = await self._send(site.transport, request, addrs)
        except BaseException:
            self._done(site)
            raise
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_Released(stream, lambda: self._done(site)), extensions=response.extensions)

    async def _send(self, transport: httpx.AsyncHTTPTransport, request: httpx.Request,
                    addrs: list[str]) -> httpx.Response:
        last: httpx.TransportError | None = None
        for addr in addrs:
            to = httpx.Request(request.method, request.url.copy_with(host=addr), headers=request.headers,
                               stream=request.stream, extensions={**request.extensions, "sni_hostname": request.url.host})
            try:
                return await transport.handle_async_request(to)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last = exc  # nothing was sent: the next address may answer
        raise last or httpx.ConnectError(f"no address for {request.url.host}", request=request)

    def _site(self, key: tuple[str, str, int]) -> tuple[_SitePool, list[_SitePool]]:
        """The pool of ``key``'s site, marked busy, and the idle pools to close (taken out here, at
        once, so no other request picks one up while it closes)."""
        now = time.monotonic()
        site = self._sites.pop(key, None)
        idle: list[_SitePool] = []
        for k, s in list(self._sites.items()):
            if s.busy == 0 and (now - s.used > KEEPALIVE or len(self._sites) >= self.connections):
                idle.append(self._sites.pop(k))
        if site is None:
            limits = httpx.Limits(max_connections=self.connections, max_keepalive_connections=self.connections,
                                  keepalive_expiry=KEEPALIVE)
            site = _SitePool(httpx.AsyncHTTPTransport(verify=self.verify, trust_env=False, retries=0, limits=limits))
        self._sites[key] = site
        site.busy += 1
        return site, idle

    def _done(self, site: _SitePool | None) -> None:
        """A request's answer is closed (or it failed): its slot and its site are free again."""
        if site is not None:
            site.busy -= 1
            site.used = time.monotonic()
        self._slots.release()

    async def aclose(self) -> None:
        sites, self._sites = list(self._sites.values()), {}
        for s in sites:
            await s.transport.aclose()


class _Released(httpx.AsyncByteStream):
    """An answer's body that calls ``done`` once, when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, done: Callable[[], None]) -> None:
        self.stream = stream
        self.done: Callable[[], None] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.stream.aclose()
        finally:
            done, self.done = self.done, None
            if done is not None:
                done()


def make_client(settings: FetchSettings, dns: DNSCache, connections: int = 100,
                verify: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """The crawl's client: every request through ``dns`` (see CheckedTransport). ``verify``: the
    certificates trusted (the system's by default)."""
    transport = CheckedTransport(dns, connections, verify or httpx.create_ssl_context())
    return httpx.AsyncClient(transport=transport, timeout=settings.timeout, follow_redirects=False, trust_env=False,
                             headers={"User-Agent": settings.user_agent, "Accept-Encoding": "gzip, deflate"})


def conditional_headers(known: KnownPage | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if known is not None:
        if known.etag:
            headers["If-None-Match"] = known.etag
        if known.last_modified:
            headers["If-Modified-Since"] = known.last_modified
    return headers


def retry_after(value: str | None, default: float) -> float:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return default
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return default


# Where every request to a site is made: ``gate(site)`` is entered for each request, redirect hops
# included (the crawler's is Frontier.slot, its per-site politeness gate).
Gate = Callable[[str], AbstractAsyncContextManager[None]]


@asynccontextmanager
async def open_gate(site: str) -> AsyncIterator[None]:
    yield


async def fetch(client: httpx.AsyncClient, settings: FetchSettings, url: str, *, method: str = "GET",
                headers: dict[str, str] | None = None, depth: int = 0,
                accept: frozenset[str] | None = None, gate: Gate = open_gate,
                follow_off_site: bool = True) -> FetchedPage:
    """GET (or HEAD) ``url`` following redirects by hand; raises FetchError with a reason.

    Each redirect hop is a request of its own, made through ``gate`` for its site. Without
    ``follow_off_site``, a redirect to another site is not followed: the answer is that redirect
    (``status`` 3xx, ``final_url`` its target), for the crawler to queue the target through that
    site's own turn and robots.txt. Each request has ``settings.deadline`` seconds in all, its
    whole body included: a server that trickles bytes fails with reason ``timeout``.
    """
    seen = {url}
    current = url
    for _ in range(settings.max_redirects + 1):
        async with gate(site_of(current)):
            try:
                async with asyncio.timeout(settings.deadline):
                    answer = await _request(client, settings, method, url, current, headers, depth, accept)
            except TimeoutError as exc:  # asyncio.timeout's: the deadline passed
                raise FetchError("timeout", f"no complete answer in {settings.deadline:g} s") from exc
        if isinstance(answer, FetchedPage):
            return answer
        status, location = answer
        target = normalise(location, current)
        if target is None:
            raise FetchError("bad_redirect", f"redirect to {location!r}")
        if target in seen:
            raise FetchError("redirect_loop", f"redirect loop back to {target}")
        seen.add(target)
        if not follow_off_site and site_of(target) != site_of(current):
            return FetchedPage(url=url, final_url=target, status=status, headers={}, body=b"", content_type="",
                               fetched_at=time.time(), depth=depth)
        current = target
    raise FetchError("too_many_redirects", f"more than {settings.max_redirects} redirects")


async def _request(client: httpx.AsyncClient, settings: FetchSettings, method: str, url: str, current: str,
                   headers: dict[str, str] | None, depth: int,
                   accept: frozenset[str] | None) -> FetchedPage | tuple[int, str]:
    """One request: the page, or a redirect's status and Location."""
    try:
        async with client.stream(method, current, headers=headers) as resp:
            if resp.status_code in REDIRECTS and "location" in resp.headers:
                return resp.status_code, resp.headers.get("location", "")
            if resp.status_code in (429, 503):
                raise FetchError(f"http_{resp.status_code}", f"HTTP {resp.status_code}",
                                 retry_after(resp.headers.get("retry-after"), 60.0))
            if resp.status_code >= 400:
                raise FetchError(f"http_{resp.status_code}", f"HTTP {resp.status_code}")
            ctype = resp.headers.get("content-type", "")
            mime = ctype.split(";", 1)[0].strip().lower()
            if accept is not None and resp.status_code != 304 and mime not in accept:
                raise FetchError("unwanted_type", f"Content-Type {mime!r} is not crawled")
            try:
                declared = int(resp.headers.get("content-length") or 0)
            except ValueError:
                declared = 0
            if declared > settings.max_bytes:
                raise FetchError("too_large", f"Content-Length {declared} over {settings.max_bytes}")
            body = bytearray()
            if method != "HEAD" and resp.status_code != 304:
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > settings.max_bytes:
                        raise FetchError("too_large", f"body over {settings.max_bytes} bytes")
            charset = ctype.split("charset=", 1)[1].split(";")[0].strip(' "') if "charset=" in ctype else None
            return FetchedPage(url=url, final_url=current, status=resp.status_code,
                               headers={k.lower(): v for k, v in resp.headers.items()}, body=bytes(body),
                               content_type=mime, fetched_at=time.time(), depth=depth, charset=charset)
    except PrivateAddress as exc:
        raise FetchError("private_address", str(exc)) from exc
    except httpx.TimeoutException as exc:
        raise FetchError("timeout", f"{type(exc).__name__} after {settings.timeout} s") from exc
    except httpx.DecodingError as exc:
        raise FetchError("bad_encoding", f"content decoding failed: {exc}") from exc
    except (httpx.TransportError, httpx.InvalidURL) as exc:
        raise FetchError("network", f"{type(exc).__name__}: {exc}") from exc
