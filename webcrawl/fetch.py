"""HTTP fetching: one httpx client for every host, a DNS cache that also refuses private addresses,
a size cap, a deadline per request (a read timeout alone lets a server that trickles one byte at
a time hold a crawl for ever), redirects followed by hand (each hop checked, loops caught, each
through its site's politeness gate) and per-URL outcomes.

Every failure becomes a ``FetchError`` with a short ``reason`` that the crawl records and counts;
nothing here stops a crawl. The DNS cache sits in the connection layer (an httpcore network
backend), so the address that was checked is the address connected to: a name cannot resolve to a
public address for the check and to 127.0.0.1 for the connection.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import socket
import time
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

import httpcore
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


class DNSCache:
    """Host name -> addresses, kept ``ttl`` seconds, with the private-address rule applied."""

    def __init__(self, ttl: float, allow_private: bool) -> None:
        self.ttl = ttl
        self.allow_private = allow_private
        self._cache: dict[str, tuple[float, list[str]]] = {}
        self.lookups = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        hit = self._cache.get(host)
        if hit and hit[0] > time.monotonic():
            addrs = hit[1]
        else:
            self.lookups += 1
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise httpcore.ConnectError(f"DNS: {exc}") from exc
            addrs = list(dict.fromkeys(str(i[4][0]) for i in infos))
            self._cache[host] = (time.monotonic() + self.ttl, addrs)
        if not self.allow_private:
            bad = [a for a in addrs if not is_public_address(a)]
            if bad:
                raise PrivateAddress(f"{host} resolves to a non-public address {bad[0]}")
        return addrs


class PrivateAddress(httpcore.ConnectError):
    pass


class _CachedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, dns: DNSCache) -> None:
        self.dns = dns
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        addrs = await self.dns.resolve(host, port)
        last: Exception | None = None
        for addr in addrs:
            try:
                return await self.inner.connect_tcp(addr, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")

    async def connect_unix_socket(self, *a: Any, **kw: Any) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not crawled")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def make_client(settings: FetchSettings, dns: DNSCache, connections: int = 100) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(retries=0)
    # httpx takes no network backend argument; its pool is replaced by one that uses the DNS cache.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(), max_connections=connections, max_keepalive_connections=connections,
        keepalive_expiry=5.0, network_backend=_CachedBackend(dns))
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
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, PrivateAddress):
            raise FetchError("private_address", str(cause)) from exc
        raise FetchError("network", f"{type(exc).__name__}: {exc}") from exc
