"""The main job: index once (``deskdex index``) or index and stay up (``deskdex daemon``)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from index import Collection

from .config import Config
from .pipeline import Indexer, Summary

logger = logging.getLogger(__name__)


def run_index(cfg: Config, roots: list[str], workers: int, idle: bool, progress: bool) -> Summary:
    with Collection.open(cfg.home.data_dir, writable=True) as coll:
        indexer = Indexer(coll, cfg.limits, workers=workers, idle=idle, commit_every=cfg["commit_every"],
                          commit_seconds=cfg["commit_seconds"])
        files = indexer.scan(roots, cfg["exclude"])
        bar = _bar(len(files)) if progress else None
        try:
            return indexer.sync(roots, files, progress=(lambda n, path: bar.update(n)) if bar else None)
        finally:
            if bar is not None:
                bar.close()


def _bar(total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True, smoothing=0.05)


def run_daemon(cfg: Config, once: bool = False) -> int:
    """Index the configured folders, then wait (live watching replaces the wait in step 4)."""
    from .cli import format_summary

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    roots = cfg.folders()
    logger.info("indexing %s into %s", ", ".join(roots), cfg.home.data_dir)
    try:
        summary = run_index(cfg, roots, workers=int(cfg["workers"]), idle=True, progress=sys.stderr.isatty())
    except KeyboardInterrupt:
        logger.info("stopped; what was indexed so far is committed")
        return 0
    print(format_summary(summary), file=sys.stderr, flush=True)
    logger.info("index ready: search with `deskdex search WORDS`%s", "" if once else "; Ctrl-C stops")
    if once:
        return 0
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    logger.info("stopped")
    return 0
