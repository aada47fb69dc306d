"""A shard served by another machine (``deskdex serve``, daemon/shardserver.py), asked over HTTP
with the token of the setting ``token``: the three questions of a merged search (index/shards.py)
as JSON requests. Whatever it answers is checked for shape before it is used; a shard that cannot
be reached, refuses the token or answers nonsense fails the search with StoreError naming it (a
search that left a shard out would look complete)."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from deskdex.errors import QueryError, StoreError

from .answers import FixedStats, Part, stats_from_json, stats_to_json
from .readable import CopyKey

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit

TIMEOUT = 10.0  # seconds for one answer: a shard slower than this fails the search, saying which
MAX_ANSWER = 64 << 20  # bytes: a page of hits with their explanations is far less
KEPT = 4  # idle connections kept to one shard: searches running at once in a daemon


class RemoteShard:
    """A served shard. Its connections are kept between questions and searches (a search asks
    three; with HTTPS each new one is a handshake): ``close()`` ends them."""

    def __init__(self, url: str, token: str, ca: str = "") -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.ca = ca  # the certificates an https:// shard is checked against (the setting tls_ca); "": the system's
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None  # made once: loading the certificates costs milliseconds

    def __repr__(self) -> str:
        return f"RemoteShard({self.url!r})"

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connect(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        if parts.scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context(cafile=self.ca or None)
            return http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=TIMEOUT, context=self._tls)
        return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT)

    def _exchange(self, what: str, body: bytes) -> tuple[int, bytes]:
        """One question's status and answer, on a kept connection if there is one. A kept one that
        fails (the server ended it, idle for a while, or was restarted: a reset, an EOF, a TLS
        EOF) is replaced once: every question is a read, safe to ask again. A timeout is not asked
        again: the shard is slow, not gone."""
        with self._lock:
            kept = self._idle.pop() if self._idle else None
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        path = (urlsplit(self.url).path or "") + "/" + what
        while True:
            conn = kept or self._connect()
            try:
                conn.request("POST", path, body, headers)
                answer = conn.getresponse()
                data = answer.read(MAX_ANSWER + 1)
            except TimeoutError:
                conn.close()
                raise
            except (OSError, http.client.HTTPException):
                conn.close()
                if kept is None:
                    raise
                kept = None
                continue
            except BaseException:
                conn.close()
                raise
            put_back = False
            if not answer.will_close and answer.isclosed():  # read to its end, and left open by the server
                with self._lock:
                    if len(self._idle) < KEPT:
                        self._idle.append(conn)
                        put_back = True
            if not put_back:
                conn.close()
            return answer.status, data

    def _ask(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        if not self.token:
            raise StoreError(f"shard {self.url}: no token to ask it with (the setting token)")
        try:
            status, data = self._exchange(what, json.dumps(body).encode())
        except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, a timeout, TLS, a bad URL
            raise StoreError(f"shard {self.url} cannot be reached: {exc}") from exc
        if status != 200:
            detail = _error_of(data)
            if status == 400 and detail.get("code") == "bad_query":
                raise QueryError(str(detail.get("message")), int(detail.get("position", 0)))
            reason = "refused the token" if status in (401, 403) else f"answered {status}"
            raise StoreError(f"shard {self.url} {reason}: {detail.get('message', http.client.responses.get(status, ''))}")
        if len(data) > MAX_ANSWER:
            raise StoreError(f"shard {self.url}: an answer over {MAX_ANSWER >> 20} MiB")
        try:
            out = json.loads(data)
        except ValueError as exc:
            raise StoreError(f"shard {self.url}: an answer that is not JSON: {exc}") from exc
        if not isinstance(out, dict):
            raise StoreError(f"shard {self.url}: an answer that is not deskdex's")
        return out

    def stats(self, terms: list[tuple[str, str]]) -> FixedStats:
        out = self._ask("stats", {"terms": terms})
        try:
            return stats_from_json(out)
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"shard {self.url}: word statistics that are not deskdex's: {exc}") from exc

    def search(self, query: str, need: int, sort: str, collapse: bool, stats: FixedStats) -> Part:
        out = self._ask("search", {"query": query, "need": need, "sort": sort, "collapse": collapse,
                                   "stats": stats_to_json(stats)})
        try:
            hits = [_hit(h) for h in out["hits"]]
            trees: list[dict[str, Any] | None] = [t if isinstance(t, dict) else None for t in out["trees"]]
            keys = [CopyKey.from_json(k) if k else None for k in out["keys"]]
            if len(keys) != len(hits) or trees and len(trees) != len(hits):
                raise ValueError("not one explanation and one key a hit")
            if not trees:
                trees = [None] * len(hits)
            return Part(int(out["total"]), hits, trees, keys, int(out["num_docs"]))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StoreError(f"shard {self.url}: results that are not deskdex's: {exc}") from exc

    def snippets(self, query: str, hits: list[SearchHit]) -> None:
        if not hits:
            return
        out = self._ask("snippets", {"query": query, "uris": [h["uri"] for h in hits]})
        try:
            made = out["snippets"]
            for h in hits:
                if h["uri"] in made:
                    snippet, highlights = made[h["uri"]]
                    h["snippet"] = str(snippet or "")
                    h["highlights"] = None if highlights is None else [[int(a), int(b)] for a, b in highlights]
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"shard {self.url}: snippets that are not deskdex's: {exc}") from exc


def _hit(h: Any) -> SearchHit:
    if not isinstance(h, dict) or not isinstance(h.get("uri"), str):
        raise ValueError("a hit without a URI")
    h["score"] = float(h.get("score", 0.0))
    for field in ("duplicates", "similar", "size"):
        h[field] = int(h.get(field) or 0)
    h["mtime"] = int(h.get("mtime") or 0)
    return h  # type: ignore[return-value]


def _error_of(data: bytes) -> dict[str, Any]:
    try:
        detail = json.loads(data[:65536])
        return detail if isinstance(detail, dict) else {}
    except ValueError:
        return {}
