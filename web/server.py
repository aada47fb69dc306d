"""The web UI's server: uvicorn on its own thread and event loop inside the daemon.

uvicorn's ``Server.main_loop`` wakes ten times a second to refresh its Date header and look for a
stop request; the daemon must not wake when nothing happens, so here it waits on an event instead (no Date header: HTTP lets an origin server
without a reliable clock leave it out). A connection that has not sent a whole request within
HEADER_SECONDS is closed, so slow clients hold a descriptor each for that long at most, not a
server's worth.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import threading
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from deskdex.errors import ConfigError
from deskdex.settings import parse_listen

from .app import Backend, Options, WebApp

logger = logging.getLogger(__name__)

HEADER_SECONDS = 10.0
CONNECTIONS = 1000  # past this uvicorn answers 503: a flood of connections cannot take every descriptor
URL_FILE = "web.json"  # in the runtime folder: where `deskdex web` finds the URL, with its token (0600)


class _Patient(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose first request is not complete in time."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.header_deadline = asyncio.get_running_loop().call_later(HEADER_SECONDS, self.too_slow, transport)

    def too_slow(self, transport: asyncio.Transport) -> None:
        if self.cycle is None and not transport.is_closing():  # no request has arrived whole
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.header_deadline.cancel()
        super().connection_lost(exc)


class _Quiet(uvicorn.Server):
    """uvicorn's server, waiting for ``stop`` where its main loop would tick ten times a second."""

    def __init__(self, config: uvicorn.Config, stop: asyncio.Event, ready: threading.Event) -> None:
        super().__init__(config)
        self.stop, self.ready = stop, ready

    async def main_loop(self) -> None:
        self.ready.set()  # listening: startup() has run
        await self.stop.wait()


class WebServer:
    """Serves ``backend`` (the daemon's ops) on ``address``; ``start`` returns once it listens."""

    def __init__(self, backend: Backend, address: str, *, system: bool, runtime_dir: str, session_hours: float = 12,
                 pam_service: str = "deskdex", tls_cert: str = "", tls_key: str = "") -> None:
        host, port = parse_listen(address, "web")
        if not system and host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigError(f"setting web: a user's daemon serves its web page on 127.0.0.1 only, not {host}: "
                              "its token is all that guards it (the system daemon logs accounts in)")
        loopback = host in ("127.0.0.1", "localhost", "::1")
        if system and not tls_cert and not loopback:
            raise ConfigError(f"setting web: {address} would carry passwords in the clear: set tls_cert and tls_key, "
                              "or serve on 127.0.0.1 behind a reverse proxy with TLS (docs/web.md)")
        self.host, self.port, self.system, self.runtime_dir = host, port, system, runtime_dir
        self.tls = (tls_cert, tls_key or None) if tls_cert else None
        self.token = "" if system else secrets.token_urlsafe(32)
        self.web = WebApp(backend, Options(system=system, token=self.token, session_hours=session_hours,
                                           pam_service=pam_service, tls=bool(tls_cert)))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}/"

    @property
    def url_with_token(self) -> str:
        return self.url + (f"?token={self.token}" if self.token else "")

    def start(self) -> WebServer:
        sock = self._listen()
        self.thread = threading.Thread(target=self._run, args=(sock,), name="deskdex-web", daemon=True)
        self.thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise ConfigError(f"setting web: cannot serve on {self.host}:{self.port}: {self._failure}")
        self._write_url()
        logger.info("web UI on %s%s", self.url, "" if self.system else " (open it with `deskdex web`)")
        return self

    def _listen(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP,
        # and with proto 0 each response's body waited 40 ms for the client's delayed ACK of its headers.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"setting web: cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        self.port = sock.getsockname()[1]
        return sock

    def _run(self, sock: socket.socket) -> None:
        self.loop = asyncio.new_event_loop()
        try:
            self.loop.run_until_complete(self._serve(sock))
        except BaseException as exc:  # noqa: BLE001 - reported by start(), or logged if it ends later
            if not self._ready.is_set():
                self._failure = exc
            else:
                logger.exception("the web UI stopped")
        finally:
            self._ready.set()
            self.loop.close()

    async def _serve(self, sock: socket.socket) -> None:
        config = uvicorn.Config(self.web.app, lifespan="off", http=_Patient, ws="none", log_level="warning",
                                access_log=False, server_header=False, date_header=False, proxy_headers=False,
                                timeout_keep_alive=5, limit_concurrency=CONNECTIONS,
                                ssl_certfile=self.tls[0] if self.tls else None,
                                ssl_keyfile=self.tls[1] if self.tls else None)
        self._stop = asyncio.Event()
        await _Quiet(config, self._stop, self._ready).serve(sockets=[sock])

    def _write_url(self) -> None:
        if self.system:
            return
        path = os.path.join(self.runtime_dir, URL_FILE)
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"url": self.url_with_token, "pid": os.getpid()}, f)
        os.replace(path + ".tmp", path)

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop.set)
        if self.thread is not None:
            self.thread.join(10)
        if not self.system:
            try:
                os.unlink(os.path.join(self.runtime_dir, URL_FILE))
            except OSError:
                pass


def read_url(runtime_dir: str) -> dict[str, Any] | None:
    """What a running daemon wrote of its web UI (``deskdex web``), or None."""
    try:
        with open(os.path.join(runtime_dir, URL_FILE)) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("url"), str) else None

