"""A mail account over IMAP (imapclient): every folder's messages, each a document named by its
RFC 5092 URL, ``imap://alice@host/INBOX;UIDVALIDITY=v/;UID=n``, its attachments members of it
(``...;UID=n#report.pdf``) through the mail converter.

A message never changes under its UID, and a UID is never used again while the folder's
UIDVALIDITY holds: so a folder's STATUS (UIDVALIDITY, UIDNEXT, MESSAGES) tells whether anything
came or went since the last sync, one round trip for an unchanged folder, and only new UIDs are
fetched. A new UIDVALIDITY (a folder made again) makes every message of it new.

Messages are read with BODY.PEEK in folders selected read-only: indexing never marks mail read.
``imap://`` talks STARTTLS (required) to any server but this machine; ``imaps://`` is TLS from
the start. Changes in INBOX wake the daemon at once through IDLE; other folders are looked at
each sync interval.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import ssl
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator
from urllib.parse import quote, unquote, urlsplit

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError, LoginError

from deskdex.errors import NotFound, SizeLimit, SourceError, SourceRefused, SourceUnreachable

from .base import Folder, Item, Options, RemoteSource

if TYPE_CHECKING:
    from deskdex.errors import ConversionError

logger = logging.getLogger(__name__)

META_BATCH = 500  # UIDs whose size and date one FETCH asks for
BODY_BYTES = 4 << 20  # bytes of messages one FETCH brings at most (one larger message: alone)
LONGEST_IDLE = 25 * 60.0  # RFC 2177: an IDLE is renewed before 29 minutes
_MESSAGE = re.compile(r"(?P<folder>[^;]+);UIDVALIDITY=(?P<validity>\d+)/;UID=(?P<uid>\d+)")


class ImapSource(RemoteSource):
    scheme = ("imap", "imaps")
    kind = "imap"

    def __init__(self, url: str, password: Callable[[], str], timeout: float = 30.0,
                 options: Options = Options()) -> None:
        super().__init__(url, password, timeout, options)
        parts = urlsplit(url)
        self.tls = parts.scheme == "imaps"
        self.host = parts.hostname or ""
        self.port = parts.port or (993 if self.tls else 143)
        self.user = unquote(parts.username or "")
        self.only = unquote(parts.path.strip("/"))  # a folder given in the URL: it and its subfolders
        self._base = f"{parts.scheme}://{quote(self.user, safe='')}@{parts.netloc.rpartition('@')[2]}/"
        self._client: IMAPClient | None = None
        self._waiting: IMAPClient | None = None
        self._selected = False  # a folder is selected on the connection

    @property
    def prefix(self) -> str:
        return self._base

    # -- the connection ------------------------------------------------------------------------------
    def _connect(self) -> IMAPClient:
        if self._client is not None:
            return self._client
        context = ssl.create_default_context()
        try:
            client = IMAPClient(self.host, self.port, ssl=self.tls, ssl_context=context, timeout=self.timeout)
        except (OSError, IMAPClientError) as exc:
            raise SourceUnreachable(f"{self.url}: cannot connect to {self.host}:{self.port}: {exc}") from exc
        try:
            if not self.tls and not _loopback(self.host):
                client.starttls(context)  # a password never crosses a network in clear
            client.login(self.user, self.password())
        except LoginError as exc:
            _drop(client)
            raise SourceRefused(f"{self.url}: the server refused the login of {self.user}: {_said(exc)}") from exc
        except (OSError, IMAPClientError) as exc:
            _drop(client)
            raise SourceUnreachable(f"{self.url}: {_said(exc)}") from exc
        except BaseException:
            _drop(client)
            raise
        client.normalise_times = False  # dates with their time zone, for the epoch seconds
        self._client = client
        return client

    def _call(self, what: Callable[[IMAPClient], Any]) -> Any:
        """``what(client)``; a broken connection is SourceUnreachable (and forgotten)."""
        client = self._connect()
        try:
            return what(client)
        except IMAPClientError as exc:
            if isinstance(exc, IMAPClient.AbortError):
                self.close()
                raise SourceUnreachable(f"{self.url}: the connection broke: {_said(exc)}") from exc
            raise
        except OSError as exc:
            self.close()
            raise SourceUnreachable(f"{self.url}: the connection broke: {exc}") from exc

    def _select(self, name: str) -> dict[bytes, Any]:
        info: dict[bytes, Any] = self._call(lambda c: c.select_folder(name, readonly=True))  # EXAMINE: flags unchanged
        self._selected = True
        return info

    def close(self) -> None:
        self._selected = False
        client, self._client = self._client, None
        if client is not None:
            try:
                client.logout()
            except (OSError, IMAPClientError):
                _drop(client)

    # -- listing --------------------------------------------------------------------------------------
    def folders(self) -> Iterator[Folder]:
        # A server may answer STATUS of the folder selected from what that session last saw:
        # nothing is selected while the folders are looked at.
        if self._selected:
            self._call(_unselect)
            self._selected = False
        listed = self._call(lambda c: c.list_folders())
        for flags, delimiter, name in listed:
            if {b"\\Noselect", b"\\NonExistent"} & {f for f in flags}:
                continue
            sep = delimiter.decode() if isinstance(delimiter, bytes) else (delimiter or "/")
            if self.only and name != self.only and not name.startswith(self.only + sep):
                continue
            base = self._base + quote(name, safe="/") + ";UIDVALIDITY="
            try:
                st = self._call(partial(_status, name))
            except IMAPClientError as exc:
                logger.warning("%s: folder %s not read: %s", self.url, name, _said(exc))
                yield Folder(name, base)  # what is indexed of it stays
                continue
            validity = st[b"UIDVALIDITY"]
            yield Folder(name, f"{base}{validity}/;UID=", f"{validity} {st[b'UIDNEXT']} {st[b'MESSAGES']}",
                         key=(name, validity))

    def items(self, folder: Folder) -> list[Item] | None:
        if folder.key is None:
            return None
        name, validity = folder.key
        try:
            info = self._select(name)
            if info.get(b"UIDVALIDITY") != validity:
                return None  # made again since its STATUS: the next sync lists it
            uids = self._call(lambda c: c.search(["ALL"]))
        except IMAPClientError as exc:
            logger.warning("%s: folder %s not listed: %s", self.url, name, _said(exc))
            return None
        shown = self._base + quote(name, safe="/") + "/;UID="
        return [Item(folder.prefix + str(uid), f"message-{uid}.eml", key=uid, display=f"{shown}{uid}",
                     mime="message/rfc822") for uid in sorted(uids)]

    # -- fetching -------------------------------------------------------------------------------------
    def fetch(self, folder: Folder, items: Iterable[Item], max_bytes: int
              ) -> Iterator[tuple[Item, bytes | ConversionError | None]]:
        name, validity = folder.key
        info = self._select(name)
        todo = list(items)
        if info.get(b"UIDVALIDITY") != validity:
            for item in todo:
                yield item, None  # gone with the folder's old UIDVALIDITY
            return
        for start in range(0, len(todo), META_BATCH):
            chunk = todo[start:start + META_BATCH]
            meta = self._call(partial(_fetch, [i.key for i in chunk], ["RFC822.SIZE", "INTERNALDATE"]))
            batch: list[Item] = []
            held = 0
            for item in chunk:
                m = meta.get(item.key)
                if m is None:
                    yield item, None  # expunged since the listing
                    continue
                date = m.get(b"INTERNALDATE")
                item = replace(item, size=int(m.get(b"RFC822.SIZE", 0)), mtime=date.timestamp() if date else 0.0)
                assert item.size is not None
                if item.size > max_bytes:
                    yield item, SizeLimit(f"{item.size} bytes is over the {max_bytes}-byte limit")
                    continue
                if batch and held + item.size > BODY_BYTES:
                    yield from self._bodies(batch)
                    batch, held = [], 0
                batch.append(item)
                held += item.size
            if batch:
                yield from self._bodies(batch)

    def _bodies(self, batch: list[Item]) -> Iterator[tuple[Item, bytes | None]]:
        got = self._call(partial(_fetch, [i.key for i in batch], ["BODY.PEEK[]"]))
        for item in batch:
            data = got.get(item.key, {}).get(b"BODY[]")
            yield item, (bytes(data) if data is not None else None)

    def original(self, uri: str) -> tuple[str, bytes]:
        match = _MESSAGE.fullmatch(uri[len(self._base):]) if uri.startswith(self._base) else None
        if match is None:
            raise NotFound(f"not a message of {self.url}: {uri}")
        name, validity, uid = unquote(match["folder"]), int(match["validity"]), int(match["uid"])
        try:
            info = self._select(name)
        except IMAPClientError as exc:
            raise NotFound(f"{uri}: the folder {name} cannot be read now: {_said(exc)}") from exc
        data = None
        if info.get(b"UIDVALIDITY") == validity:
            data = self._call(partial(_fetch, [uid], ["BODY.PEEK[]"])).get(uid, {}).get(b"BODY[]")
        if data is None:
            raise NotFound(f"{uri}: no longer on the server")
        return f"message-{uid}.eml", bytes(data)

    # -- waiting --------------------------------------------------------------------------------------
    def wait_for_change(self, seconds: float) -> bool:
        """IDLE on INBOX (where new mail comes) until the server tells of a message come or gone."""
        try:
            client = self._connect()
            if not client.has_capability("IDLE") or self.only and self.only.upper() != "INBOX":
                return super().wait_for_change(seconds)
            self._select("INBOX")
            client.idle()
            self._waiting = client
            try:
                responses = client.idle_check(timeout=min(seconds, LONGEST_IDLE))
            finally:
                self._waiting = None
                client.idle_done()
        except (OSError, IMAPClientError, SourceError) as exc:  # the next sync says what is wrong
            self.close()
            logger.debug("%s: IDLE ended: %s", self.url, exc)
            return False
        return any(len(r) > 1 and r[1] in (b"EXISTS", b"EXPUNGE") for r in responses)

    def interrupt(self) -> None:
        super().interrupt()
        client = self._waiting
        if client is not None:
            try:
                client.socket().shutdown(socket.SHUT_RDWR)  # idle_check returns at once
            except OSError:
                pass


def _status(name: str, client: IMAPClient) -> Any:
    return client.folder_status(name, [b"UIDVALIDITY", b"UIDNEXT", b"MESSAGES"])


def _fetch(uids: list[int], what: list[str], client: IMAPClient) -> Any:
    return client.fetch(uids, what)


def _unselect(client: IMAPClient) -> None:
    if client.has_capability("UNSELECT"):
        client.unselect_folder()
    else:
        client.close_folder()  # read-only: CLOSE expunges nothing


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _said(exc: BaseException) -> str:
    text = exc.args[0] if exc.args else exc
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def _drop(client: IMAPClient) -> None:
    try:
        client.shutdown()
    except OSError:
        pass
