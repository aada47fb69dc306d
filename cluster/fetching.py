"""The worker's side of a crawl: make one request a coordinator hands out (deskdex.cluster.crawling),
convert the page it gives, and push both back to the coordinator, which keeps the crawl's frontier
and stores the page.

Politeness: the coordinator hands out a site's requests one at a time, each after the site's delay
since the previous one came back, so a site sees one worker at a time whichever worker it is. A
request's own hops (a HEAD before its GET, each redirect within the site) are spaced by the same
delay here.

A request is made once: the coordinator opens ``deskdex:fetch:<task id>`` while it waits, and the
first worker to take the task closes it (atomically, in Redis). A second delivery (Celery's, after a
broker restart or a lost acknowledgement) or a task the coordinator has given up finds it closed and
is dropped unmade, so no request reaches a site outside its turn.

Whoever can write to the broker chooses the URLs a worker fetches: private, loopback and
link-local addresses are refused unless the worker itself allows them (``deskdex worker
--allow-private``), whatever the message asks."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
from typing import Any

import httpx

from deskdex.errors import FetchError
from deskdex.webcrawl import (
    DNSCache, FetchSettings, FetchedPage, Frontier, fetch_page, make_client, page_source, wants_text,
)

from deskdex import wire as schemas

from . import wire
from .worker import STATE, push

logger = logging.getLogger(__name__)

_local = threading.local()  # each worker thread's event loop

# The task's key is "open" while its coordinator waits: take it. KEEPTTL: the coordinator's expiry.
_TAKE = "if redis.call('get', KEYS[1]) == 'open' then redis.call('set', KEYS[1], 'taken', 'KEEPTTL') return 1 end return 0"


def fetch_key(task_id: str) -> str:
    return f"deskdex:fetch:{task_id}"


@functools.lru_cache(maxsize=1)
def _taker(client: Any) -> Any:
    """_TAKE on ``client``, asked for by its digest (EVALSHA), not sent whole with every request."""
    return client.register_script(_TAKE)


def fetch_task(task: Any, *args: Any, **kwargs: Any) -> None:
    """The task (its arguments deskdex.wire's FetchArgs): fetch, convert, push the result to its
    ``reply`` list (before the task is acknowledged)."""
    try:
        arg = schemas.arguments(args, kwargs, schemas.FetchArgs, "not a task to fetch")
        job = wire.fetch_from_message(arg.request)
        # Lowered by the coordinator, never raised: its conversion's limits and the request's own.
        job.limits = STATE.capped(job.limits)
        asked, own = job.settings, STATE.fetch
        job.settings = dataclasses.replace(
            asked, timeout=min(asked.timeout, own.timeout), deadline=min(asked.deadline, own.deadline),
            max_bytes=min(asked.max_bytes, own.max_bytes), max_redirects=min(asked.max_redirects, own.max_redirects),
            dns_ttl=min(asked.dns_ttl, own.dns_ttl))
    except wire.BadMessage as exc:
        # Acknowledged: it can never succeed.
        logger.error("dropped task %s, which is not deskdex's: %s", task.request.id, exc)
        return
    assert STATE.redis is not None
    if not _taker(STATE.redis)(keys=[fetch_key(task.request.id)]):
        logger.info("dropped a request already made, or given up by its coordinator: %s", job.req.url)
        return
    if job.settings.allow_private and not STATE.allow_private:
        job.settings = dataclasses.replace(job.settings, allow_private=False)
    try:
        page = _loop().run_until_complete(_fetch(job, _client(job.settings)))
    except FetchError as exc:
        answer = schemas.FetchResult(task.request.id, error=schemas.FetchFailure(exc.reason, str(exc), exc.retry_after))
    else:
        answer = schemas.FetchResult(task.request.id, page=wire.page_message(page))
        if wants_text(job.req, page):
            for _, outcomes in STATE.pool(job.limits).map([page_source(page)]):
                answer.outcomes = wire.outcome_messages(outcomes)
    push(arg.reply, answer)


async def _fetch(job: wire.FetchTask, client: httpx.AsyncClient) -> FetchedPage:
    gate = Frontier(delay=job.delay).slot  # the hops of this one request, a delay apart
    return await fetch_page(client, job.settings, job.req, job.known, job.head_above, gate)


def _loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None:
        loop = _local.loop = asyncio.new_event_loop()
    return loop


def _client(settings: FetchSettings) -> httpx.AsyncClient:
    """This thread's HTTP client for ``settings``, kept: making one costs 44 ms (its TLS context),
    more than a request to a near server. A coordinator's other settings replace it."""
    held: tuple[FetchSettings, httpx.AsyncClient] | None = getattr(_local, "client", None)
    if held is not None and held[0] == settings:
        return held[1]
    if held is not None:
        _loop().run_until_complete(held[1].aclose())
    client = make_client(settings, DNSCache(settings.dns_ttl, settings.allow_private), 4)
    _local.client = (settings, client)
    return client
