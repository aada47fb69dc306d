"""URL normalisation, crawl scope, shard assignment and the private-address rule.

Normalised URLs are the keys of the seen-set and of the store, so two spellings of one page
(``HTTP://Example.com:80/a/./b/../c?b=2&a=1#top``) become one (``http://example.com/a/c?a=1&b=2``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import posixpath
from urllib.parse import parse_qsl, quote, unquote, urlencode, urljoin, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
# Query parameters that only track or identify a session: dropping them collapses endless variants.
SESSION_PARAMS = frozenset({"sid", "sessionid", "session_id", "phpsessid", "jsessionid", "utm_source", "utm_medium",
                            "utm_campaign", "utm_term", "utm_content", "gclid", "fbclid"})
_SAFE_PATH = "/:@!$&'()*+,;=-._~%"


def normalise(url: str, base: str | None = None) -> str | None:
    """The canonical form of ``url`` (resolved against ``base``), or None if it is not crawlable http(s)."""
    try:
        if base:
            url = urljoin(base, url.strip())
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS or not parts.hostname:
            return None
        host = parts.hostname.lower().rstrip(".")
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
        port = parts.port
    except ValueError:  # a bad port or an unparseable host
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = posixpath.normpath(parts.path) if parts.path else "/"
    if parts.path.endswith("/") and path != "/":
        path += "/"  # normpath drops the trailing slash, which can name a different resource
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    path = quote(unquote(path), safe=_SAFE_PATH)
    return urlunsplit((scheme, netloc, path, _query(parts.query), ""))


def _query(query: str) -> str:
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    # Sorting is safe only when no key repeats (a repeated key's order can carry meaning).
    keys = [k for k, _ in pairs]
    kept = [(k, v) for k, v in pairs if k.lower() not in SESSION_PARAMS]
    if len(set(keys)) == len(keys):
        kept.sort()
    return urlencode(kept)


def site_of(url: str) -> str:
    """The politeness unit: scheme-less host with a non-default port (``example.com``, ``127.0.0.1:8080``)."""
    return urlsplit(url).netloc


def hostname(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def registered_domain(host: str) -> str:
    """A cheap registered-domain guess (last two labels, three under a two-letter ccTLD's second level)."""
    labels = host.split(".")
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host
    except ValueError:
        pass
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in {"co", "ac", "gov", "org", "com", "net", "edu"}:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def in_scope(url: str, seeds: list[str], scope: str) -> bool:
    """``host``: same host and port as a seed; ``domain``: same registered domain; ``prefix``: under a seed URL."""
    for seed in seeds:
        if scope == "prefix" and url.startswith(seed.rsplit("/", 1)[0] + "/"):
            return True
        if scope == "host" and site_of(url) == site_of(seed):
            return True
        if scope == "domain" and registered_domain(hostname(url)) == registered_domain(hostname(seed)):
            return True
    return False


def shard_of(site: str, shards: int) -> int:
    """Which of ``shards`` crawler instances owns ``site``: a stable hash of the host, as the notes say.
    Also which index shard a folder's files go to (``deskdex index --shard``): a path's bytes that
    are not UTF-8 are hashed as they are (surrogateescape)."""
    digest = hashlib.blake2b(site.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def is_public_address(address: str) -> bool:
    """False for loopback, private, link-local, multicast, reserved and unspecified addresses."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast
