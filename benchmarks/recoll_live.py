"""Run deskdex's live daemon (deskdex.daemon.loop.Daemon: reconcile, then follow the watcher) on the
folders of HOME's config, until SIGTERM. compare_recoll.py uses it while `deskdex daemon` does not
start the watcher yet.

    python benchmarks/recoll_live.py HOME
"""

from __future__ import annotations

import logging
import signal
import sys
import threading

from deskdex import settings
from deskdex.daemon.loop import Daemon
from deskdex.paths import Home

logger = logging.getLogger(__name__)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    d = Daemon(settings.load(Home.resolve(sys.argv[1]).ensure()))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=d.stop).start())
    try:
        d.run()
    finally:
        d.close()


if __name__ == "__main__":
    main()
