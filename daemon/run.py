"""The main job: index once (``deskdex index``) or index and stay up (``deskdex daemon``)."""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any

from .config import Config
from .pipeline import Indexer, Summary

logger = logging.getLogger(__name__)


def run_index(cfg: Config, roots: list[str], workers: int, idle: bool, progress: bool) -> Summary:
    with cfg.open_collection(writable=True) as coll:
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


def run_daemon(cfg: Config, once: bool = False, system: bool = False) -> int:
    """The daemon in the foreground: one per home, reconcile, then watch and serve until SIGTERM/Ctrl-C.
    ``system``: enterprise mode (daemon/accounts.py), serving every local user what they may read."""
    import os

    from .daemon import Daemon
    from .instance import InstanceLock
    from .server import Server, private_dir

    from converters.isolation import lower_priority

    home = cfg.home
    with InstanceLock(os.path.join(home.data_dir, "daemon.lock")):
        if not system:
            private_dir(home.runtime_dir)
        daemon = Daemon(cfg, system=system)
        # The socket's threads keep the priority they start with: a search is a person waiting,
        # and at idle priority it would wait for every busy program on the machine to finish.
        server = None if once else Server(home.socket, daemon.request_handlers(), public=system).start()
        # Everything else yields to the user, not only the converters: this thread and all it
        # starts (the writer with tantivy and the duplicate tables, the watcher, the converter
        # processes) run at idle CPU and I/O priority. On Linux these are per thread; where they
        # are per process the server yields too. When nothing else runs, idle costs nothing.
        lower_priority()
        previous = {sig: signal.signal(sig, lambda *_: daemon.stop()) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            logger.info("deskdex daemon %d%s: %s into %s", os.getpid(), " (system)" if system else "",
                        ", ".join(daemon.folders()), home.data_dir)
            daemon.run(once=once)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if server is not None:
                server.stop()
            daemon.close()  # commits what is done
        logger.info("stopped")
    return 0
