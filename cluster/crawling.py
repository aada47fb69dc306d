"""The coordinator's side of a crawl through workers: each request of the crawl goes to a worker
(cluster/fetching.py) on its site's crawl queue, and the crawl's frontier is kept in Redis.

The coordinator runs webcrawl's Crawler as on one machine (its sink writes the index here), with
two parts replaced (webcrawl.crawler.Remote):

- the fetcher: a request is a task on ``deskdex.crawl.<k>`` (k the hash of its site), made by a
  worker, which converts the page too. The site's politeness slot is held here while the task is
  out, so a site is asked by one worker at a time, the site's delay after the previous request
  came back: politeness holds across the cluster whoever takes the task. A task is made once
  (cluster/fetching.py); one nobody answers (its worker killed after taking it, a broker that lost
  it) is given up and sent again as a new task after a silence.
- the journal: the seen URLs, the queued requests (those under way until they end) and the count
  of pages fetched live in Redis under ``deskdex:crawl:<id>:``, ``id`` a digest of the crawl's
  seeds, scope and shard. A crawl whose every process stopped (or whose coordinator was stopped)
  takes up where it was when it is started again; one that ends leaves nothing behind. The shards
  of one crawl (``--shard I/N``, a coordinator each) hand each other the links to their sites
  through it (``Group``), and end together.

Sitemaps and feeds are requests like pages, made by the workers and read here. Robots.txt is read by
the coordinator itself (once a day per site, in the site's turn like any request): one set of rules
for the whole cluster, which a redirect of robots.txt to another site cannot split."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeAlias, TypeVar

from deskdex import wire as schemas
from deskdex.errors import BrokerUnavailable, FetchError
from deskdex.webcrawl import Request, site_of

from . import wire
from .app import FETCH_TASK, crawl_queue, make_app
from .broker import redis_client
from .fetching import fetch_key
from .pool import ATTEMPTS, shown_url
from .worker import REPLY_PREFIX

if TYPE_CHECKING:
    from deskdex.converters import Limits
    from deskdex.webcrawl import CrawlSettings, Crawler, FetchedPage, Fetcher, KnownPage

logger = logging.getLogger(__name__)

PREFIX = "deskdex:crawl:"
T = TypeVar("T")
_Answer: TypeAlias = schemas.FetchResult | wire.BadMessage  # a worker's result, or why it is not one


class RemoteCrawl:
    """webcrawl.crawler.Remote through the broker ``broker``; ``close()`` when the crawls are done."""

    def __init__(self, broker: str, redelivery: float, limits: Limits, shard_timeout: float = 120.0) -> None:
        self.broker, self.redelivery, self.limits = broker, redelivery, limits
        self.shard_timeout = max(1.0, shard_timeout)  # the setting crawl.shard_timeout
        self._groups: list[Group] = []
        self._app = make_app(broker, redelivery)
        self._redis = redis_client(broker)
        self._reply = f"{REPLY_PREFIX}{uuid.uuid4().hex}"
        self._waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[_Answer]]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._listener = threading.Thread(target=self._listen, name="deskdex-crawl-replies", daemon=True)
        self._listener.start()

    def close(self) -> None:
        import redis

        self._closed.set()
        for group in self._groups:
            group.stop()
        self._listener.join(10)
        try:
            self._redis.delete(self._reply)
            self._redis.close()
        except redis.RedisError:
            pass
        self._app.close()

    def journal(self, settings: CrawlSettings) -> RedisJournal:
        i, n = settings.shard
        group = None
        if n > 1:
            journals = [_journal_keys(crawl_id(settings, k)) for k in range(n)]
            group = Group(self._redis, group_id(settings), i, n, journals, self.shard_timeout)
            self._groups = [g for g in self._groups if not g.stopped()] + [group]  # a daemon runs many crawls
        return RedisJournal(self._redis, crawl_id(settings), self.broker, group)

    def fetcher(self, crawler: Crawler) -> Fetcher:
        async def fetch(req: Request, known: KnownPage | None) -> FetchedPage:
            return await self._fetch(crawler, req, known)

        return fetch

    async def _fetch(self, crawler: Crawler, req: Request, known: KnownPage | None) -> FetchedPage:
        site = site_of(req.url)
        s = crawler.s
        # No answer for this long: the task is lost (a dead worker's comes back after redelivery).
        silence = self.redelivery + 2 * s.fetch.deadline + 5.0
        loop = asyncio.get_running_loop()
        async with crawler.frontier.slot(site):
            msg = wire.fetch_to_wire(req, known, s.fetch, s.head_above, crawler.frontier.site(site).delay,
                                     self.limits)
            for attempt in range(1, ATTEMPTS + 1):
                tid = uuid.uuid4().hex
                future: asyncio.Future[_Answer] = loop.create_future()
                with self._lock:
                    self._waiting[tid] = (loop, future)
                try:
                    await loop.run_in_executor(None, self._send, tid, site, msg, silence)
                    answer = await asyncio.wait_for(future, silence)
                except TimeoutError:
                    logger.warning("no worker answered for %s in %.0f s (try %d of %d)", req.url, silence,
                                   attempt, ATTEMPTS)
                    await loop.run_in_executor(None, self._close, tid)
                    continue
                finally:
                    with self._lock:
                        self._waiting.pop(tid, None)
                return _answer(answer)
        raise FetchError("no_worker", f"no deskdex worker answered ({ATTEMPTS} tries, {silence:.0f} s each): "
                                      "is one running, and taking this site's queue?")

    def _close(self, tid: str) -> None:
        """No worker may take task ``tid`` any more: it is given up. (An answered task's key says
        taken already, until it expires.)"""
        import redis

        try:
            self._redis.delete(fetch_key(tid))
        except redis.RedisError:
            pass  # it expires

    def _send(self, tid: str, site: str, msg: dict[str, Any], silence: float) -> None:
        deadline = time.monotonic() + 60.0
        while True:
            try:
                self._redis.set(fetch_key(tid), "open", ex=int(silence) + 1)
                self._app.send_task(FETCH_TASK, args=[msg, self._reply], task_id=tid, queue=crawl_queue(site))
                return
            except Exception as exc:  # kombu's OperationalError, the transport's and redis-py's errors
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"cannot queue a request on the broker {shown_url(self.broker)}: "
                                            f"{exc}") from exc
                logger.warning("the broker %s refused a request (%s): trying again", shown_url(self.broker), exc)
                time.sleep(1.0)

    def _listen(self) -> None:
        """Hand each reply to the request waiting for it; a second delivery's is dropped."""
        import redis

        while not self._closed.is_set():
            try:
                item = self._redis.blpop([self._reply], timeout=1)
            except redis.RedisError as exc:
                logger.warning("waiting for crawl replies: %s", exc)  # after the client's own retries
                self._closed.wait(1.0)
                continue
            if item is None:
                continue
            # A reply without an id is nobody's: dropped. One for a request that is not as it should
            # be fails that request (bad_answer, _answer), which the crawl records and goes on.
            answer: _Answer
            try:
                tid = schemas.decode(item[1], schemas.ResultId, "not a worker's result").id
            except wire.BadMessage as exc:
                logger.error("dropped a reply that is not a worker's: %s", exc)
                continue
            try:
                answer = schemas.decode(item[1], schemas.FetchResult, "not a worker's result")
            except wire.BadMessage as exc:
                answer = exc
            with self._lock:
                waiting = self._waiting.get(tid)
            if waiting is not None:
                loop, future = waiting
                loop.call_soon_threadsafe(_resolve, future, answer)


def _resolve(future: asyncio.Future[_Answer], answer: _Answer) -> None:
    if not future.done():
        future.set_result(answer)


def _answer(answer: _Answer) -> FetchedPage:
    """The page a worker's answer holds, or the FetchError it reports."""
    try:
        if isinstance(answer, wire.BadMessage):
            raise answer
        if answer.error is not None:
            err = answer.error
            raise FetchError(err.reason, err.message, err.retry_after)
        assert answer.page is not None  # one of them: FetchResult's __post_init__
        page = wire.page_from_message(answer.page)
        if answer.outcomes is not None:
            page.converted = wire.outcomes_from_messages(answer.outcomes)
        return page
    except wire.BadMessage as exc:
        raise FetchError("bad_answer", f"a worker's answer that is not deskdex's: {exc}") from exc


def crawl_id(settings: CrawlSettings, shard: int | None = None) -> str:
    """The same crawl asked for again (its seeds, scope and shard) has the same id; with ``shard``,
    the id of that shard of it."""
    i, n = settings.shard
    return _digest(settings, [i if shard is None else shard, n])


def _journal_keys(crawl: str) -> tuple[str, str, str]:
    """Where RedisJournal keeps crawl ``crawl``: its queued requests, seen URLs, count of pages."""
    return (f"{PREFIX}{crawl}:queue", f"{PREFIX}{crawl}:seen", f"{PREFIX}{crawl}:pages")


def group_id(settings: CrawlSettings) -> str:
    """The shards of one crawl (``--shard I/N`` for each I, the same seeds and scope) share this id."""
    return _digest(settings, settings.shard[1])


def _digest(settings: CrawlSettings, shard: Any) -> str:
    key = json.dumps([sorted(settings.seeds), settings.scope, shard])
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


# Idle: this shard says so (and that it is alive), then looks at the others. A shard heard from
# within the timeout (ARGV[3] seconds; one never heard from counts from this shard's start, ARGV[4])
# that is busy or has links waiting keeps this one waiting. When none does, the crawl ends here: over
# on every shard (its state deleted, a mark of the end left) when no shard is left with work, else
# ended without the shards gone silent while busy or with links waiting: {2, shard, links, ...}.
# KEYS: idle flags, over mark, heartbeats, the N inboxes, then every shard's journal keys.
_IDLE = """
if redis.call('exists', KEYS[2]) == 1 then return {1} end
local me, n, timeout, started = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = tonumber(redis.call('TIME')[1])
redis.call('hset', KEYS[1], me, '1')
redis.call('hset', KEYS[3], me, now)
local left = {}
for k = 0, n - 1 do
  local waiting = redis.call('llen', KEYS[4 + k])
  if k == me then
    if waiting > 0 then return {0} end
  else
    local busy = waiting > 0 or redis.call('hget', KEYS[1], k) ~= '1'
    local beat = tonumber(redis.call('hget', KEYS[3], k) or started)
    if busy and now - beat <= timeout then return {0} end
    if busy then table.insert(left, k); table.insert(left, waiting) end
  end
end
if #left > 0 then table.insert(left, 1, 2); return left end
redis.call('del', KEYS[1], KEYS[3], unpack(KEYS, 4))
redis.call('set', KEYS[2], '1', 'EX', 600)
return {1}
"""
# Reading what was handed over: this shard is busy again as it reads it, in the same step. What it
# read leaves the inbox only with the journal's next write, which queues it (RedisJournal.durable):
# a shard killed in between reads it again.
_TAKE = """
local got = redis.call('lrange', KEYS[2], 0, 999)
if #got > 0 then redis.call('hset', KEYS[1], ARGV[1], '0') end
return got
"""
# This shard is alive: the broker's clock, so that machines whose clocks differ agree.
_BEAT = """
local now = redis.call('TIME')[1]
redis.call('hset', KEYS[1], ARGV[1], now)
return now
"""


class Group:
    """The shards of one crawl, each run by its own coordinator (``deskdex crawl --shard I/N
    --broker``), handing each other the links to their sites: an inbox (a list) per shard, an idle
    flag and a heartbeat per shard, and a mark that the crawl is over, under
    ``deskdex:crawlgroup:<id>:``.

    A shard not heard from for ``timeout`` seconds (killed, its machine gone, or never started) is
    gone: the others end without it rather than wait for ever, and what was handed to it waits in
    its inbox. A shard that ends so keeps its seen URLs, so that run again it takes up only what
    was handed to it since; the crawl is over (and its state deleted) when the shards that are
    left end with nothing handed over and no shard gone while it had work."""

    def __init__(self, client: Any, gid: str, shard: int, shards: int, journals: list[tuple[str, str, str]],
                 timeout: float) -> None:
        self.r, self.shard, self.shards, self.timeout = client, shard, shards, timeout
        base = f"deskdex:crawlgroup:{gid}:"
        self.flags, self.over, self.beats = base + "idle", base + "over", base + "alive"
        self.inboxes = [f"{base}inbox:{k}" for k in range(shards)]
        self._journals = [key for keys in journals for key in keys]
        self._idle = client.register_script(_IDLE)
        self._take = client.register_script(_TAKE)
        self._beat = client.register_script(_BEAT)
        self._started = 0
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None

    def start(self) -> None:
        """This shard is at work: a mark of an earlier crawl's end no longer holds. It says it is
        alive every quarter of the timeout (at most every 10 s) until ``stop``."""
        self.r.pipeline().hset(self.flags, str(self.shard), "0").delete(self.over).execute()
        self._started = int(self._beat(keys=[self.beats], args=[self.shard]))
        if self._beating is None:
            self._beating = threading.Thread(target=self._beat_on, name="deskdex-crawl-shard-alive", daemon=True)
            self._beating.start()

    def _beat_on(self) -> None:
        import redis

        while not self._stop.wait(min(10.0, self.timeout / 4)):
            try:
                self._beat(keys=[self.beats], args=[self.shard])
            except redis.RedisError as exc:  # the crawl itself says when the broker is gone for good
                logger.debug("saying shard %d is alive: %s", self.shard, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._beating is not None:
            self._beating.join(10)

    def stopped(self) -> bool:
        return self._stop.is_set()

    def idle(self) -> dict[int, int] | None:
        """None while another shard may still hand this one work; else the shards gone while they
        had work, with the links waiting for each (empty: the crawl is over on every shard)."""
        got = self._idle(keys=[self.flags, self.over, self.beats, *self.inboxes, *self._journals],
                         args=[self.shard, self.shards, self.timeout, self._started])
        if int(got[0]) == 0:
            return None
        return {int(got[k]): int(got[k + 1]) for k in range(1, len(got), 2)}

    def take(self) -> list[bytes]:
        return list(self._take(keys=[self.flags, self.inboxes[self.shard]], args=[self.shard]) or [])


class RedisJournal:
    """webcrawl.frontier.Journal in Redis: a set of seen URLs, a hash of queued requests by URL, a
    count of pages fetched.

    Written once per commit of the sink, not once per URL: the requests queued and ended since the
    last one go in one pipeline when the sink says what it stored is durable (``durable``), the new
    ones before the ended ones are forgotten. A coordinator killed in between loses neither: the
    requests that found the unwritten links are still in the hash, and are asked again on resume
    (as are those whose pages the sink had not committed). A broker that is restarted is waited
    for (cluster.broker); one gone for longer stops the crawl with BrokerUnavailable, and starting
    it again resumes it."""

    def __init__(self, client: Any, crawl: str, broker: str, group: Group | None = None) -> None:
        self.r = client
        self.broker = broker
        self.group = group
        self._handed: dict[int, list[str]] = {}  # shard -> requests for it, since the last write
        self._waiting = False  # this shard has nothing left, and waits for the others
        self._taken = 0  # requests read from the inbox, not yet queued in Redis
        self._left: dict[int, int] | None = None  # the crawl ended here: the shards gone with work, their links
        self.queue_key, self.seen_key, self.pages_key = _journal_keys(crawl)
        # Since the last write: URLs seen, requests queued (URL -> request), requests ended. A URL is
        # in one of the last two, whichever happened last (a retry is queued again after it ended).
        self._seen: set[str] = set()
        self._queued: dict[str, str] = {}
        self._ended: set[str] = set()
        self._pages: int | None = None

    def _do(self, what: str, *commands: tuple[str, Any]) -> list[Any]:
        """``commands`` in one pipeline: what each gave."""
        def run() -> list[Any]:
            pipe = self.r.pipeline(transaction=True)  # all or nothing: requests move from an inbox to the queue
            for name, args in commands:
                getattr(pipe, name)(*args)
            return list(pipe.execute())

        return self._guard(what, run)

    def resume(self) -> tuple[set[str], list[Request], int] | None:
        if self.group is not None:
            self._guard("joining the crawl's other shards", self.group.start)
        queued, seen, pages = self._do("reading the crawl's state", ("hgetall", (self.queue_key,)),
                                       ("smembers", (self.seen_key,)), ("get", (self.pages_key,)))
        if not queued and (self.group is None or not seen):
            return None  # nothing left to do: a crawl that ended, or never began
        # A shard that ended while another had work keeps its seen URLs, and takes up what was handed to it.
        reqs = _requests(queued.values())
        return {s.decode("utf-8", "surrogateescape") for s in seen}, reqs, int(pages or 0)

    def added(self, req: Request) -> None:
        self._seen.add(req.url)
        self._ended.discard(req.url)
        self._queued[req.url] = _request_json(req)

    def hand_over(self, shard: int, req: Request) -> bool:
        if self.group is None:
            return False
        self._handed.setdefault(shard, []).append(_request_json(req))
        return True

    def idle(self) -> dict[int, int] | None:
        if self.group is None:
            return {}
        g = self.group
        left = self._guard("asking whether the crawl is over", g.idle)
        if left is None:
            if not self._waiting:
                self._waiting = True
                logger.info("nothing left on shard %d of %d: waiting for the crawl's other shards (each run by "
                            "`deskdex crawl --shard I/%d --broker ...`) to end or to hand links over",
                            g.shard, g.shards, g.shards)
            return None
        for shard, links in left.items():
            logger.warning("shard %d of %d of this crawl has not been heard from in %.0f s (stopped, or never "
                           "started) and had work: ending shard %d without it; %d links wait for it. Run "
                           "`deskdex crawl ... --shard %d/%d --broker ...` to finish the crawl",
                           shard, g.shards, g.timeout, g.shard, links, shard, g.shards)
        self._left = left
        return left

    def _guard(self, what: str, call: Callable[[], T]) -> T:
        import redis

        try:
            return call()
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"lost the broker {shown_url(self.broker)} while {what}: {exc}") from exc

    def done(self, url: str) -> None:
        self._queued.pop(url, None)
        self._ended.add(url)

    def fetched(self, pages: int) -> None:
        self._pages = pages

    def durable(self) -> list[Request]:
        commands: list[tuple[str, Any]] = []
        if self.group is not None:
            for shard, reqs in self._handed.items():
                commands.append(("rpush", (self.group.inboxes[shard], *reqs)))
        if self._seen:
            commands.append(("sadd", (self.seen_key, *self._seen)))
        if self._queued:
            commands.append(("hset", (self.queue_key, None, None, self._queued)))
        if self._pages is not None:
            commands.append(("set", (self.pages_key, self._pages)))
        if self._ended:
            commands.append(("hdel", (self.queue_key, *self._ended)))
        if self._taken:  # the inbox's head, read at the last write; only ever appended to since
            assert self.group is not None
            commands.append(("ltrim", (self.group.inboxes[self.group.shard], self._taken, -1)))
        if commands:
            self._do("writing the crawl's state", *commands)
        self._seen, self._queued, self._ended, self._pages, self._handed = set(), {}, set(), None, {}
        if self.group is None:
            return []
        raw = self._guard("taking what other shards handed over", self.group.take)
        self._taken = len(raw)
        if raw:
            self._waiting = False
        return _requests(raw)

    def cleared(self) -> None:
        # The budget is spent and the crawl about to end: a kill before it does starts the next
        # one afresh, from its seeds and the pages the catalog knows.
        self._queued.clear()
        self._do("emptying the queue", ("delete", (self.queue_key,)))

    def finished(self) -> None:
        commands: list[tuple[str, Any]] = []
        if self.group is not None:
            g = self.group
            g.stop()
            if self._left is None:  # its budget spent: links handed to it are dropped, as those past a budget are
                commands.append(("delete", (g.inboxes[g.shard],)))
                commands.append(("hset", (g.flags, str(g.shard), "1")))
        if self._left:  # its seen URLs and inbox kept for when the shards gone come back
            commands.append(("delete", (self.queue_key,)))
        else:  # over (the group's state went with the mark of the end, Group.idle), or alone
            commands.append(("delete", (self.queue_key, self.seen_key, self.pages_key)))
        self._do("ending the crawl", *commands)


def _request_json(req: Request) -> str:
    return json.dumps({"url": req.url, "depth": req.depth, "priority": req.priority, "kind": req.kind,
                       "retries": req.retries, "off_topic_run": req.off_topic_run})


def _requests(raws: Iterable[bytes | str]) -> list[Request]:
    out = []
    for raw in raws:
        try:
            d = json.loads(raw)
            out.append(Request(str(d["url"]), int(d["depth"]), float(d["priority"]), str(d["kind"]),
                               int(d["retries"]), int(d["off_topic_run"])))
        except (ValueError, KeyError, TypeError) as exc:
            logger.error("dropped a queued request that is not deskdex's: %s", exc)
    return out
