"""A shard served by another machine (``deskdex serve``, daemon/shardserver.py), asked over HTTP
with the token of the setting ``token``: the three questions of a merged search (index/shards.py)
as JSON requests, each a schema of deskdex.wire. Whatever it answers is checked against its schema
before it is used; a shard that cannot be reached, refuses the token or answers nonsense fails the
search with StoreError naming it and, for nonsense, the field and why (a search that left a shard
out would look complete)."""

from __future__ import annotations

import ssl
import threading
from typing import TYPE_CHECKING, TypeVar

from deskdex import wire
from deskdex.errors import BadMessage, QueryError, StoreError

from .answers import FixedStats, Part, stats_message, stats_of
from .readable import CopyKey

if TYPE_CHECKING:
    import httpx

    from deskdex.protocol import SearchHit

T = TypeVar("T")

TIMEOUT = 10.0  # seconds to connect, and between two reads of an answer: a slower shard fails the search, saying which
MAX_ANSWER = 64 << 20  # bytes: a page of hits with their explanations is far less
KEPT = 4  # idle connections kept to one shard: searches running at once in a daemon


class RemoteShard:
    """A served shard, asked through one httpx.Client: its connections are kept between questions
    and searches (a search asks three; with HTTPS each new one is a handshake); ``close()`` ends
    them. An https:// shard is checked against the certificates of the setting tls_ca (else the
    system's), its host name included; the environment's proxies and certificates are not used."""

    def __init__(self, url: str, token: str, ca: str = "") -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.ca = ca  # the certificates an https:// shard is checked against (the setting tls_ca); "": the system's
        self._client: httpx.Client | None = None  # made on the first question: loading certificates costs milliseconds
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteShard({self.url!r})"

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                # Plain http: no certificate to check, and httpx's default would load certifi's (0.1 to 0.4 s).
                verify: ssl.SSLContext | bool = False
                if self.url.startswith("https:"):
                    verify = ssl.create_default_context(cafile=self.ca or None)
                self._client = httpx.Client(
                    verify=verify, timeout=TIMEOUT, trust_env=False,
                    limits=httpx.Limits(max_keepalive_connections=KEPT, keepalive_expiry=None),
                    headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"})
            return self._client

    def _exchange(self, what: str, body: bytes) -> tuple[int, bytes]:
        """One question's status and answer (at most MAX_ANSWER + 1 bytes of it). A kept connection
        the server ended meanwhile (idle, or restarted: a reset, an EOF) is replaced once: every
        question is a read, safe to ask again. A timeout is not asked again: the shard is slow, not
        gone; nor is a refused connection."""
        import httpx

        client = self._http()
        for again in (True, False):
            try:
                with client.stream("POST", f"{self.url}/{what}", content=body) as answer:
                    data = bytearray()
                    for chunk in answer.iter_bytes():
                        data += chunk
                        if len(data) > MAX_ANSWER:
                            break
                    return answer.status_code, bytes(data)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if not again:
                    raise
        raise AssertionError("unreachable")

    def _ask(self, what: str, question: wire.Question, kind: type[T]) -> T:
        import httpx

        if not self.token:
            raise StoreError(f"shard {self.url}: no token to ask it with (the setting token)")
        try:
            status, data = self._exchange(what, wire.encode(question))
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:  # refused, a timeout, TLS, a bad URL
            raise StoreError(f"shard {self.url} cannot be reached: {exc}") from exc
        if len(data) > MAX_ANSWER:
            raise StoreError(f"shard {self.url}: an answer over {MAX_ANSWER >> 20} MiB")
        if status != 200:
            try:
                detail = wire.decode(data[:65536], wire.ErrorAnswer, "a refusal")
            except BadMessage:
                detail = wire.ErrorAnswer()
            if status == 400 and detail.code == QueryError.code:
                raise QueryError(detail.message, detail.position)
            reason = "refused the token" if status in (401, 403) else f"answered {status}"
            raise StoreError(f"shard {self.url} {reason}: {detail.message or _reason(status)}")
        try:
            return wire.decode(data, kind, f"shard {self.url}: an answer to /{what} that is not deskdex's")
        except BadMessage as exc:
            raise StoreError(str(exc)) from exc

    def stats(self, terms: list[tuple[str, str]]) -> FixedStats:
        return stats_of(self._ask("stats", wire.StatsQuestion(terms), wire.WordStats))

    def search(self, query: str, need: int, sort: str, collapse: bool, stats: FixedStats) -> Part:
        question = wire.SearchQuestion(query, need, sort, collapse, stats_message(stats))  # type: ignore[arg-type]
        out = self._ask("search", question, wire.SearchAnswer)
        try:
            keys = [CopyKey.from_json(list(k)) if k else None for k in out.keys]
        except (TypeError, ValueError) as exc:
            raise StoreError(f"shard {self.url}: copy keys that are not deskdex's: {exc}") from exc
        trees = out.trees or [None] * len(out.hits)
        hits: list[SearchHit] = list(out.hits)  # type: ignore[arg-type]  # each given its page below
        for h in hits:
            h.setdefault("page", None)  # a shard from before pages sends none
            h.setdefault("related", False)  # nor one from before meaning
        return Part(out.total, hits, trees, keys, out.num_docs)

    def snippets(self, query: str, hits: list[SearchHit]) -> None:
        if not hits:
            return
        made = self._ask("snippets", wire.SnippetsQuestion(query, [h["uri"] for h in hits]), wire.SnippetsAnswer)
        for h in hits:
            if h["uri"] in made.snippets:
                snippet, highlights = made.snippets[h["uri"]]
                h["snippet"] = snippet or ""
                h["highlights"] = None if highlights is None else [[a, b] for a, b in highlights]
                h["page"] = made.pages.get(h["uri"])


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
