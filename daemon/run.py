"""``deskdex daemon``: one daemon per home, reconcile, then watch and serve until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
import os
import signal
from typing import TYPE_CHECKING, Any, Sequence

from deskdex.cluster import check_setting as check_broker, record_broker
from deskdex.converters import lower_priority
from deskdex.errors import ConfigError
from deskdex.settings import Config

from .configwatch import ConfigWatch
from .instance import InstanceLock
from .loop import Daemon
from .ops import Ops
from .server import Limits, Peer, Server, private_dir, raise_descriptor_limit

if TYPE_CHECKING:
    from deskdex.web import Account, WebServer

logger = logging.getLogger(__name__)


def run_daemon(cfg: Config, once: bool = False, system: bool = False, problems: Sequence[str] = ()) -> int:
    """The daemon in the foreground. ``system``: enterprise mode (daemon/accounts.py), serving every
    local user what they may read. ``problems``: what of the config file is not used (settings that
    did not fit, left at their defaults; a file that is not TOML: configwatch.load_for_daemon's),
    shown in ``status`` until the file is fixed."""
    home = cfg.home
    check_broker(cfg.settings.broker, system)
    # Before anything opens a file: each caller's connection is a descriptor, and the daemon must
    # never be the one left without (the watcher, the index, the converters' pipes).
    raise_descriptor_limit()
    with InstanceLock(os.path.join(home.data_dir, "daemon.lock")):
        if not system:
            private_dir(home.runtime_dir)
            record_broker(home.runtime_dir, cfg.settings.broker)  # --broker too: `deskdex status` shows it
        daemon = Daemon(cfg, system=system)
        daemon.settings_problems = list(problems)
        for problem in problems:
            logger.warning("setting: %s", problem)
        # A hand edit of the config file is applied while the daemon runs (daemon/configwatch.py).
        config_watch = None if once else ConfigWatch(daemon).start()
        # The socket's threads keep the priority they start with: a search is a person waiting,
        # and at idle priority it would wait for every busy program on the machine to finish.
        server = None if once else Server(home.socket, Ops(daemon).handlers(), public=system,
                                          limits=Limits.from_settings(cfg)).start()
        web = None if server is None or not cfg.settings.web else _serve_web(server, daemon, system)
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
            if web is not None:
                web.stop()
            if server is not None:
                server.stop()
            if config_watch is not None:
                config_watch.stop()
            daemon.close()  # commits what is done
        logger.info("stopped")
    return 0


class _WebBackend:
    """The web UI's way to the ops: the socket server's own checks, for the logged-in account."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def call(self, op: str, args: dict[str, Any], account: Account) -> Any:
        return self.server.call(op, args, Peer(account.uid, account.gid, None))


def _serve_web(server: Server, daemon: Daemon, system: bool) -> WebServer | None:
    """The search page and REST API on the setting web (docs/web.md); a failure to serve it is a
    problem shown in ``status``, not a daemon that does not start."""
    from deskdex.web import WebServer

    s = daemon.cfg.settings
    try:
        return WebServer(_WebBackend(server), s.web, system=system, runtime_dir=daemon.cfg.home.runtime_dir,
                         session_hours=s.web_session_hours, pam_service=s.web_pam_service, tls_cert=s.tls_cert,
                         tls_key=s.tls_key).start()
    except ConfigError as exc:
        logger.error("%s", exc)
        daemon.settings_problems.append(str(exc))
        return None
