"""The daemon's crawl thread: the crawls clients hand over the socket (``deskdex crawl URL`` beside a
running daemon), and keeping the configured sites fresh: each is crawled when it has never been,
and again when the freshness model says some of its pages are due (the crawler revisits known
pages with conditional requests, so unchanged pages cost a 304).

One crawl runs at a time, so two crawls never share a site's politeness. A crawl asked for over
the socket goes first: a site's upkeep under way gives way to it (and is taken up again after).
``reload()`` (the crawl_reload op, after ``deskdex crawl add`` or ``remove``) makes the thread read
the ``[crawl]`` table again at once: new sites are crawled, a removed site's crawl stops.

The thread shares the daemon's one writer: each page is stored under the daemon's write lock, so
crawled pages and file changes take turns. It sleeps with no timeout while no site is configured
and nobody asks for a crawl.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from deskdex.converters import Document, Limits
from deskdex.errors import BadArgs, ConfigError, DeskdexError
from deskdex.pipeline import IndexSink, convert_one, known_pages
from deskdex.settings import Settings
from deskdex.webcrawl import STATE_FILE, FetchedPage, PutResult, SiteStats, config as crawlconfig

if TYPE_CHECKING:
    from deskdex.index import Collection
    from deskdex.settings import Config
    from deskdex.webcrawl import CrawlRequest, CrawlRun, CrawlSite

logger = logging.getLogger(__name__)

CHECK_SECONDS = 3600.0  # how often due pages are looked for, only while crawls are configured
STOP_WAIT = 3.0  # seconds a stopping daemon waits for the crawl under way to end (its pages are journaled)
KEEP_JOBS = 20  # ended jobs remembered for crawl_job


class LockedSink(IndexSink):
    """An IndexSink over the daemon's writable collection, each page stored under ``lock``."""

    def __init__(self, coll: Collection, lock: threading.RLock, limits: Limits, commit_seconds: float) -> None:
        self.lock = lock
        with lock:
            super().__init__(coll, limits, owns_collection=False, commit_seconds=commit_seconds)

    def put_page(self, page: FetchedPage) -> PutResult:
        with self.lock:
            return super().put_page(page)

    def commit(self) -> None:
        with self.lock:
            super().commit()

    def close(self) -> None:
        with self.lock:
            super().close()


class CrawlJob:
    """A crawl asked for over the socket; what the crawl_job op answers about it."""

    def __init__(self, number: int, request: CrawlRequest) -> None:
        self.number, self.request = number, request
        self.state = "waiting"  # then crawling, and one of done, cancelled, failed
        self.progress = {"fetched": 0, "stored": 0, "failed": 0}
        self.summary: dict[str, Any] | None = None
        self.message: str | None = None
        self.cancelled = False
        self.run: CrawlRun | None = None  # while crawling
        self.ended = threading.Event()

    def to_json(self) -> dict[str, Any]:
        run = self.run
        return {"job": self.number, "state": self.state, "site": run.seeds[0] if run and run.seeds else None,
                "progress": dict(self.progress), "summary": self.summary, "message": self.message}

    def end(self, state: str, message: str | None = None) -> None:
        self.message = message
        self.state = state  # after the summary: a reader that sees the end sees the summary too
        self.ended.set()


class CrawlScheduler:
    def __init__(self, config_file: str, data_dir: str, coll: Collection, lock: threading.RLock,
                 limits: Limits, cfg: Config | None = None) -> None:
        self.config_file = config_file
        self.cfg = cfg  # with the setting broker, crawls are made by the cluster's workers
        self.state_path = os.path.join(data_dir, STATE_FILE)
        self.coll, self.lock, self.limits = coll, lock, limits
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="deskdex-crawls", daemon=True)
        self._wake = threading.Event()
        self._guard = threading.Lock()  # jobs, the run under way, the reload flag
        self._jobs: dict[int, CrawlJob] = {}
        self._numbers = itertools.count(1)
        self._reload = False
        self._current: tuple[CrawlRun, CrawlJob | None, str | None] | None = None  # the run, its job or site
        self._unfinished: set[str] = set()  # sites whose upkeep gave way before its end: taken up again
        self.last_run: dict[str, float] = {}

    def start(self) -> CrawlScheduler:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self._stop_current(lambda job, site: True)
        self._wake.set()
        if self.thread.is_alive():
            self.thread.join(STOP_WAIT)
            if self.thread.is_alive():
                logger.warning("the crawl under way did not end in %g s: abandoned", STOP_WAIT)
        with self._guard:
            for job in self._jobs.values():
                if not job.ended.is_set():
                    job.end("cancelled", "the daemon stopped")

    # -- what the socket's ops ask -----------------------------------------------------------------
    def submit(self, request: CrawlRequest) -> CrawlJob:
        """Queue a crawl; a site's upkeep under way gives way to it."""
        with self._guard:
            job = CrawlJob(next(self._numbers), request)
            self._jobs[job.number] = job
            ended = [n for n, j in self._jobs.items() if j.ended.is_set()]
            for n in ended[:max(0, len(ended) - KEEP_JOBS)]:
                del self._jobs[n]
        self._stop_current(lambda job, site: job is None)
        self._wake.set()
        return job

    def job(self, number: int) -> CrawlJob:
        with self._guard:
            job = self._jobs.get(number)
        if job is None:
            raise BadArgs(f"no crawl job {number} (the daemon keeps the last {KEEP_JOBS} that ended)")
        return job

    def cancel(self, number: int) -> CrawlJob:
        job = self.job(number)
        with self._guard:
            job.cancelled = True
            if job.state == "waiting":
                job.end("cancelled", "cancelled before it started")
        self._stop_current(lambda j, site: j is job)
        return job

    def reload(self) -> list[str]:
        """Read the [crawl] table again now: the configured sites' URLs. A removed site's crawl stops."""
        sites = [s.url for s in crawlconfig.load(self.config_file).sites]
        with self._guard:
            self._reload = True
        self._stop_current(lambda job, site: site is not None and site not in sites)
        self._wake.set()
        return sites

    def _stop_current(self, which: Callable[[CrawlJob | None, str | None], bool]) -> None:
        """Stop the run under way if ``which(its job, its site)`` says so."""
        with self._guard:
            current = self._current
        if current is not None and which(current[1], current[2]):
            current[0].stop()

    # -- the thread --------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self.stop_event.is_set():
            self._wake.clear()
            with self._guard:
                job = next((j for j in self._jobs.values() if j.state == "waiting"), None)
                if job is not None:
                    job.state = "crawling"  # under the guard: cancel() sees it taken, or ends it first
                self._reload = False
            if job is not None:
                self._run_job(job)
                continue
            try:
                sites = crawlconfig.load(self.config_file).sites
            except ConfigError as exc:
                logger.warning("configured crawls not kept fresh: %s", exc)
                sites = []
            for site in sites:
                if self._interrupted():
                    break
                try:
                    if site.url in self._unfinished or self._due(site.url):
                        self._run_site(site)
                except Exception:  # a crawl must never take the daemon down
                    logger.exception("crawl of %s failed", site.url)
            else:
                # Every site looked at: sleep until asked for something, or the next check.
                self._wake.wait(CHECK_SECONDS if sites else None)

    def _interrupted(self) -> bool:
        """A stop, a crawl asked for or a new [crawl] table: the sites' round ends early."""
        with self._guard:
            waiting = any(j.state == "waiting" for j in self._jobs.values())
            return self.stop_event.is_set() or waiting or self._reload

    def _due(self, url: str) -> bool:
        from deskdex.webcrawl import due

        host = urlsplit(url).netloc
        with self.lock:
            pages = [p for p in known_pages(self.coll.web_pages()) if urlsplit(p.url).netloc == host]
        if not pages:
            return True
        budget = crawlconfig.load(self.config_file).settings.revisit_budget_per_day
        return bool(due(pages, budget, time.time()))

    def _run(self, request: CrawlRequest, job: CrawlJob | None, site: str | None) -> CrawlRun:
        """Run ``request`` into the index to its end, or its stop: the run, with its ``total``."""
        from deskdex.cluster import remote_crawl
        from deskdex.webcrawl import CrawlRun, plan

        plans = plan(crawlconfig.load(self.config_file), request, self._texts)
        if not plans:
            raise ConfigError("no URL given and no crawl configured (deskdex crawl add URL)")
        remote = remote_crawl(self.cfg) if self.cfg is not None else None
        # Without the daemon's Config (a test's runner): the built-in defaults.
        typed = self.cfg.settings if self.cfg is not None else Settings()
        sink = LockedSink(self.coll, self.lock, self.limits, typed.commit_seconds)
        try:
            run = CrawlRun(plans, sink, self.state_path, _progress_to(job) if job is not None else None, remote)
            with self._guard:
                self._current = (run, job, site)
                if job is not None:
                    job.run = run
            if self.stop_event.is_set() or (job is not None and job.cancelled):
                run.stop()  # asked for before the run could be stopped
            run.run()
        finally:
            with self._guard:
                self._current = None
            sink.close()
            if remote is not None:
                remote.close()
        return run

    def _run_job(self, job: CrawlJob) -> None:
        from deskdex.webcrawl import summary

        try:
            run = self._run(job.request, job, None)
        except DeskdexError as exc:
            job.end("failed", str(exc))
            return
        except Exception as exc:  # a crawl must never take the daemon down
            logger.exception("crawl job %d failed", job.number)
            job.end("failed", f"{type(exc).__name__}: {exc}")
            return
        job.summary = summary(run.total)
        if run.stopped:
            job.end("cancelled", "cancelled" if job.cancelled else "the daemon stopped")
        else:
            job.end("done")

    def _run_site(self, site: CrawlSite) -> None:
        from deskdex.webcrawl import CrawlRequest

        request = CrawlRequest([site.url], site.scope, site.max_pages, site.max_depth, site.topic)
        run = self._run(request, None, site.url)
        if run.stopped:
            self._unfinished.add(site.url)
            logger.info("crawl of %s gave way: taken up again later", site.url)
            return
        self._unfinished.discard(site.url)
        self.last_run[site.url] = time.time()
        t = run.total.totals()
        logger.info("crawled %s: fetched %d, stored %d, unchanged %d", site.url, t.fetched, t.stored, t.unchanged)

    def _texts(self, paths: list[str]) -> list[str]:
        """The texts of a focused crawl's example documents, each converted in a worker."""
        texts = []
        for path in paths:
            doc = convert_one(path, self.limits)
            if isinstance(doc, Document):
                texts.append(doc.text())
            else:
                logger.warning("topic example %s not used: %s", path, doc)
        return texts


def _progress_to(job: CrawlJob) -> Callable[[SiteStats], None]:
    from deskdex.webcrawl import progress_of

    def update(t: SiteStats) -> None:
        job.progress = progress_of(t)

    return update
