"""A folder of a network share over SMB 2/3 (smbprotocol's smbclient): every file of the folder and of
its subfolders, each a document named by its URL, ``smb://server[:port]/share/folder/sub/report.pdf``
(percent-encoded: a ``#`` in a name is ``%23``, since ``#`` separates an archive's members).

Each directory of the tree is a folder of the sync, listed whole with one directory query; a file's
size and last-write time come with the listing, so an unchanged tree costs one request per directory
and no file is read twice. A folder is ``flat``: only the files directly in it are its, its
subdirectories are folders of their own, so a directory gone (or no longer reachable) takes exactly its
files with it. A directory that cannot be listed (access denied) keeps what is indexed under it. The
files are read through an open that lets others read, write and delete them meanwhile; links,
junctions, devices and offline files (a tape's, a cloud's) are left alone.

Between syncs the daemon waits on an SMB2 CHANGE_NOTIFY of the whole tree (``wait_for_change``).
Samba notifies changes made through the share anywhere in it, but of files written on its own disk
only those of the watched folder itself (one inotify watch): those come with the next interval.

Enterprise mode (``Options.rights``): each file fetched has its security descriptor read too (one
request more), and its DACL says which local accounts may find it (deskdex.sources.sids maps the SIDs).
Known limitation: the rights are read when the content is, so a changed ACL alone (chmod, setfacl, a
Windows ACL edit: no new size or last-write time) is not seen until the file changes.

The account logs in with NTLM (``smb://alice@server/...`` or the source's ``user``, which may be
``DOMAIN\\alice``), the password asked once per login; the connection is this source's own (never
smbclient's process-wide pool), and ``close`` ends it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator
from urllib.parse import quote, unquote, urlsplit

import smbclient
from smbprotocol.exceptions import SMBAuthenticationError, SMBException, SMBOSError, SMBResponseException

from deskdex.errors import NotFound, SizeLimit, SourceError, SourceRefused, SourceUnreachable, UnreadableFile

from .base import Folder, Item, Options, RemoteSource
from .sids import READS, Ace, SidMap, readers

if TYPE_CHECKING:
    from deskdex.errors import ConversionError

logger = logging.getLogger(__name__)

DEFAULT_PORT = 445
MAX_DEPTH = 64  # directories below the source's folder: deeper is a loop through links the server follows
SD_BYTES = 65536  # the largest security descriptor asked for
SETTLE = 2.0  # seconds after a change notification before the sync: the rest of a copy comes meanwhile

# NTSTATUS values (MS-ERREF 2.3) the errors are told apart by.
STATUS_ACCESS_DENIED = 0xC0000022
STATUS_SHARING_VIOLATION = 0xC0000043
STATUS_BAD_NETWORK_NAME = 0xC00000CC
STATUS_NOT_A_DIRECTORY = 0xC0000103
GONE = frozenset({0xC0000034, 0xC000003A, 0xC000000F, 0xC0000056, 0xC0000123})  # no such name/path/file, delete pending, deleted
LOGIN_REFUSED = frozenset({0xC000006D, 0xC000006A, 0xC0000071, 0xC0000072, 0xC000006E, 0xC000006F, 0xC0000070,
                           0xC0000193, 0xC0000224, 0xC0000234})  # logon failure, wrong/expired password, account off
SESSION_LOST = frozenset({0xC00000C9, 0xC0000203, 0xC000035C, 0xC000020C, 0xC0000128})  # name/session deleted...

# FILE_ATTRIBUTE_* (MS-FSCC 2.6) and reparse tags (2.1.2.1)
DIRECTORY = 0x10
DEVICE = 0x40
REPARSE_POINT = 0x400
OFFLINE = 0x1000
RECALL_ON_OPEN = 0x40000
RECALL_ON_DATA_ACCESS = 0x400000
NOT_READ = DEVICE | OFFLINE | RECALL_ON_OPEN | RECALL_ON_DATA_ACCESS  # reading would hang or bring it back
LINK_TAGS = frozenset({0xA0000003, 0xA000000C, 0xA000001D, 0x80000014, 0x80000023, 0x80000024, 0x80000025,
                       0x80000026})  # junction, symlink, WSL symlink, NFS special file, socket, FIFO, devices
DENY_OBJECT_TYPES = frozenset({0x06, 0x0A, 0x0C})  # ACCESS_DENIED_{OBJECT,CALLBACK,CALLBACK_OBJECT}_ACE_TYPE


class RightsUnreadable(Exception):
    """The security descriptor could not be asked for with this smbprotocol (see ``_descriptor``)."""


class SmbSource(RemoteSource):
    scheme = ("smb",)
    kind = "smb"

    def __init__(self, url: str, password: Callable[[], str], timeout: float = 30.0,
                 options: Options = Options()) -> None:
        super().__init__(url, password, timeout, options)
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.port = parts.port or DEFAULT_PORT
        self.user = unquote(parts.username or "") or options.user or ""
        names = [unquote(p) for p in parts.path.split("/") if p]
        self.share = names[0] if names else ""
        self.folder = "/".join(names[1:])  # the folder of the share this source is ("": all of it)
        host = f"[{self.host}]" if ":" in self.host else self.host
        netloc = host + (f":{parts.port}" if parts.port else "")
        self._base = f"smb://{netloc}/" + quote("/".join(names), safe="/") + "/"
        self._root = "\\\\" + "\\".join([self.host, *names])
        self._pool: dict[str, Any] = {}  # this source's connections (smbclient keys them host:port)
        self._kw: dict[str, Any] | None = None  # every smbclient call's keywords, once logged in
        self._listed: dict[str, list[Item]] = {}  # a folder's files from the walk, until items() takes them
        self._sids: SidMap | None = None
        self._watcher: Any = None  # the change notification waited on (wait_for_change)

    @property
    def prefix(self) -> str:
        return self._base

    # -- the connection ------------------------------------------------------------------------------
    def _connect(self) -> dict[str, Any]:
        """smbclient's keywords for this source's session, logging in first if it has none. They go
        with every call: a connection smbclient has to make again logs in again only with them."""
        if self._kw is not None:
            return self._kw
        if not self.host or not self.share:
            raise SourceRefused(f"{self.url}: no server or no share named (smb://server[:port]/share/folder)")
        if not self.user:
            raise SourceRefused(f"{self.url}: no account to log in as (smb://user@server/... or the source's user)")
        kw: dict[str, Any] = {"username": self.user, "password": self.password(), "port": self.port,
                              "connection_timeout": self.timeout, "connection_cache": self._pool}
        try:
            smbclient.register_session(self.host, **kw)
        except (SMBException, OSError, ValueError) as exc:
            error = self._source_error(exc) or SourceUnreachable(f"{self.url}: cannot log in: {_said(exc)}")
            self.close()
            raise error from exc
        self._kw = kw
        return kw

    def _call(self, what: Callable[[dict[str, Any]], Any]) -> Any:
        """``what(keywords)``; a failure of the server or the session is SourceUnreachable or
        SourceRefused (and the connection is dropped), a file's own (SMBOSError) is raised as it is."""
        kw = self._connect()
        try:
            return what(kw)
        except (SMBException, OSError, ValueError) as exc:
            error = self._source_error(exc)
            if error is None:
                raise
            raise error from exc

    def _source_error(self, exc: BaseException) -> SourceError | None:
        """What ``exc`` says of the whole source (the connection is dropped then); None for an error of
        one file or directory (an SMBOSError or a status of one request)."""
        status = _status(exc)
        error: SourceError | None
        if status in LOGIN_REFUSED or isinstance(exc, SMBAuthenticationError):
            error = SourceRefused(f"{self.url}: the server refused the login of {self.user}: {_said(exc)}")
        elif status == STATUS_BAD_NETWORK_NAME:
            error = SourceRefused(f"{self.url}: no share {self.share} on {self.host}")
        elif status in SESSION_LOST:
            error = SourceUnreachable(f"{self.url}: the session ended: {_said(exc)}")
        elif isinstance(exc, (SMBOSError, SMBResponseException)):
            return None
        elif isinstance(exc, ValueError) and not (str(exc).startswith("Failed to connect")
                                                  or isinstance(exc.__cause__, OSError)):
            return None  # not the network's: a bug, raised as it is
        else:  # refused, reset, timed out, closed under us (SMBConnectionClosed), name not resolved
            what = "cannot connect" if str(exc).startswith("Failed to connect") else "the connection broke"
            error = SourceUnreachable(f"{self.url}: {what} to {self.host}:{self.port}: {_said(exc)}")
        self.close()
        return error

    def close(self) -> None:
        self._kw = None
        self._listed.clear()
        smbclient.reset_connection_cache(fail_on_error=False, connection_cache=self._pool)

    # -- listing --------------------------------------------------------------------------------------
    def folders(self) -> Iterator[Folder]:
        """Every directory of the tree, depth first, each listed once here (its files wait for
        ``items``): a flat Folder, or one that is not flat when it could not be listed."""
        self._listed.clear()
        self._sids = None  # accounts and groups are looked up again each sync
        todo: list[tuple[str, str, int]] = [("", self._root, 0)]  # (path under the folder, UNC, depth)
        seen: set[int] = set()  # directories' file ids: a link back up is not walked again
        while todo:
            rel, unc, depth = todo.pop()
            prefix = self._base + (quote(rel, safe="/") + "/" if rel else "")
            name = rel or "."
            try:
                entries = self._list(unc)
            except SMBOSError as exc:
                status = _status(exc)
                if not rel and status in GONE | {STATUS_NOT_A_DIRECTORY}:
                    raise SourceRefused(f"{self.url}: no folder {self.folder} on the share {self.share}") from exc
                if status in GONE:
                    logger.info("%s: folder %s gone while the share was listed", self.url, name)
                    continue  # no Folder: what was indexed of it goes
                logger.warning("%s: folder %s not listed: %s", self.url, name, _said(exc))
                yield Folder(name, prefix, key=unc)  # not flat: everything indexed under it stays
                continue
            files, dirs = self._split(entries, prefix, unc)
            self._listed[unc] = files
            yield Folder(name, prefix, key=unc, flat=True)
            if depth >= MAX_DEPTH:
                if dirs:
                    logger.warning("%s: folder %s is %d deep: its subfolders are not walked", self.url, name, depth)
                continue
            for sub, file_id in sorted(dirs, reverse=True):
                if file_id and file_id in seen:
                    logger.info("%s: folder %s/%s is one already walked (a link): skipped", self.url, name, sub)
                    continue
                seen.add(file_id)
                todo.append((f"{rel}/{sub}" if rel else sub, f"{unc}\\{sub}", depth + 1))

    def items(self, folder: Folder) -> list[Item] | None:
        if not folder.flat:
            return None  # it could not be listed
        listed = self._listed.pop(folder.key, None)
        if listed is not None:
            return listed
        try:
            entries = self._list(folder.key)
        except SMBOSError as exc:
            if _status(exc) in GONE:
                return []
            logger.warning("%s: folder %s not listed: %s", self.url, folder.name, _said(exc))
            return None
        return self._split(entries, folder.prefix, folder.key)[0]

    def _list(self, unc: str) -> list[Any]:
        return list(self._call(lambda kw: list(smbclient.scandir(unc, **kw))))

    def _split(self, entries: list[Any], prefix: str, unc: str) -> tuple[list[Item], list[tuple[str, int]]]:
        """The files (Items) and the subdirectories (name, file id) of one directory's listing."""
        files: list[Item] = []
        dirs: list[tuple[str, int]] = []
        for entry in entries:
            info = entry.smb_info
            attributes = int(info.file_attributes)
            if attributes & REPARSE_POINT and (attributes & DIRECTORY or int(info.ea_size) in LINK_TAGS):
                continue  # a link or junction (the ea_size field holds a reparse point's tag): not followed
            if attributes & DIRECTORY:
                dirs.append((entry.name, int(info.file_id)))
                continue
            if attributes & NOT_READ:
                continue
            uri = prefix + quote(entry.name, safe="")
            files.append(Item(uri, entry.name, size=int(info.end_of_file), mtime=info.last_write_time.timestamp(),
                              key=f"{unc}\\{entry.name}", display=unquote(uri)))
        files.sort(key=lambda i: i.uri)
        return files, dirs

    # -- fetching -------------------------------------------------------------------------------------
    def fetch(self, folder: Folder, items: Iterable[Item], max_bytes: int
              ) -> Iterator[tuple[Item, bytes | ConversionError | None]]:
        for item in items:
            try:
                yield self._fetch_one(item, max_bytes)
            except (SMBOSError, SMBResponseException) as exc:  # the file's own: _call raised the rest
                status = _status(exc)
                if status in GONE:
                    yield item, None  # gone since it was listed: the next sync forgets it
                elif status == STATUS_ACCESS_DENIED:
                    yield item, UnreadableFile(f"permission denied on the share: {item.display}")
                elif status == STATUS_SHARING_VIOLATION:
                    yield item, UnreadableFile(f"in use by another program that shares it with nobody: {item.display}")
                else:
                    yield item, UnreadableFile(f"{item.display}: {_said(exc)}")

    def _fetch_one(self, item: Item, max_bytes: int) -> tuple[Item, bytes | ConversionError]:
        if self.options.rights:
            try:
                aces = self._call(partial(_descriptor, self.host, item.key))
            except RightsUnreadable as exc:
                return item, UnreadableFile(f"{item.display}: its rights could not be read ({exc})")
            if self._sids is None:
                self._sids = SidMap(self.options.sid_map)
            uids, everyone = readers(aces, self._sids)
            item = replace(item, readers=uids, everyone=everyone)
        if item.size is not None and item.size > max_bytes:
            return item, _too_large(item.size, max_bytes)
        data, size, mtime = self._call(partial(_read, item.key, max_bytes))
        item = replace(item, size=size, mtime=mtime if mtime is not None else item.mtime)
        if data is None:
            return item, _too_large(size, max_bytes)
        return item, data

    # -- waiting --------------------------------------------------------------------------------------
    def wait_for_change(self, seconds: float) -> bool:
        """SMB2 CHANGE_NOTIFY on the source's folder and everything under it (Samba answers it through
        inotify, a Windows server through its own): True once the server tells of a file or folder
        added, removed, renamed or written, after SETTLE seconds more for the rest of a copy. A server
        that does not offer it (an error) gives False: the daemon then waits for the interval."""
        from smbprotocol.change_notify import ChangeNotifyFlags, CompletionFilter, FileSystemWatcher
        from smbprotocol.open import (
            CreateDisposition,
            CreateOptions,
            DirectoryAccessMask,
            FileAttributes,
            ImpersonationLevel,
            Open,
            ShareAccess,
        )
        from smbprotocol.tree import TreeConnect

        self._interrupted = threading.Event()
        try:
            session = smbclient.register_session(self.host, **self._connect())
            tree = TreeConnect(session, f"\\\\{self.host}\\{self.share}")
            tree.connect()
            try:
                handle = Open(tree, self.folder.replace("/", "\\"))
                handle.create(ImpersonationLevel.Impersonation, DirectoryAccessMask.FILE_LIST_DIRECTORY,
                              FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
                              ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
                              CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE)
                try:
                    watcher = FileSystemWatcher(handle)
                    watcher.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME
                                  | CompletionFilter.FILE_NOTIFY_CHANGE_DIR_NAME
                                  | CompletionFilter.FILE_NOTIFY_CHANGE_SIZE
                                  | CompletionFilter.FILE_NOTIFY_CHANGE_LAST_WRITE,
                                  flags=ChangeNotifyFlags.SMB2_WATCH_TREE, output_buffer_length=0)
                    self._watcher = watcher
                    fired = watcher.response_event.wait(seconds)
                    if not fired:
                        watcher.cancel()
                        watcher.response_event.wait(self.timeout)
                    told = fired and not watcher.cancelled and not self._interrupted.is_set()
                    if told:
                        watcher.result  # noqa: B018 - raises what the server answered instead (not supported...)
                finally:
                    self._watcher = None
                    handle.close()
            finally:
                tree.disconnect()
        except Exception as exc:  # not offered, or the server went away: the next sync says which
            logger.info("%s: no change notification (synced each interval): %s", self.url, exc)
            return False
        if told:
            self._interrupted.wait(SETTLE)
        return told and not self._interrupted.is_set()

    def interrupt(self) -> None:
        super().interrupt()
        watcher = self._watcher
        if watcher is not None:
            try:
                watcher.cancel()
            except Exception as exc:  # its connection is gone: the wait ends with it
                logger.debug("%s: cancelling the change notification: %s", self.url, exc)

    def original(self, uri: str) -> tuple[str, bytes]:
        rest = uri[len(self._base):] if uri.startswith(self._base) else ""
        names = [unquote(n) for n in rest.split("/")]
        if not rest or "#" in rest or any(n in ("", ".", "..") or "\\" in n for n in names):
            raise NotFound(f"not a file of {self.url}: {uri}")
        try:
            data, _size, _mtime = self._call(partial(_read, "\\".join([self._root, *names]), None))
        except (SMBOSError, SMBResponseException) as exc:
            if _status(exc) in GONE:
                raise NotFound(f"{uri}: no longer on the share") from exc
            raise NotFound(f"{uri}: cannot be read now: {_said(exc)}") from exc
        assert data is not None
        return names[-1], data


def _read(unc: str, max_bytes: int | None, kw: dict[str, Any]) -> tuple[bytes | None, int, float | None]:
    """The bytes of the file at ``unc`` (None when over ``max_bytes``), with its size and last-write
    time as the open saw them (the create response carries them: no request more; None where not told)."""
    with smbclient.open_file(unc, mode="rb", share_access="rwd", **kw) as f:
        handle = getattr(getattr(f, "raw", None), "fd", None)  # smbclient's Open: its create response's
        size = getattr(handle, "end_of_file", None)
        written = getattr(handle, "last_write_time", None)
        mtime = written.timestamp() if written is not None else None
        if max_bytes is not None and isinstance(size, int) and size > max_bytes:
            return None, size, mtime
        data: bytes = f.read() if max_bytes is None else f.read(max_bytes + 1)
    size = size if isinstance(size, int) else len(data)
    return (data if max_bytes is None or len(data) <= max_bytes else None), size, mtime


def _descriptor(host: str, unc: str, kw: dict[str, Any]) -> list[Ace] | None:
    """The DACL of the file at ``unc`` (None: a NULL DACL, everyone may), asked with SMB2 QUERY_INFO
    (OWNER|GROUP|DACL) on an open for READ_CONTROL alone.

    smbclient has no call for a security descriptor, so this goes one layer down, to smbprotocol's
    public protocol objects (the session smbclient keeps, a tree connect, an open, the QUERY_INFO
    request), never to a private name of either. What a future smbprotocol renames or reshapes
    (ImportError, AttributeError, TypeError, KeyError) is RightsUnreadable, a reason for this file not
    to be indexed, never a crash. Errors of the server or the file pass as they are."""
    try:
        from smbprotocol.file_info import InfoType
        from smbprotocol.open import (
            CreateDisposition,
            CreateOptions,
            FileAttributes,
            FilePipePrinterAccessMask,
            ImpersonationLevel,
            InfoAdditionalInformation,
            Open,
            ShareAccess,
            SMB2QueryInfoRequest,
            SMB2QueryInfoResponse,
        )
        from smbprotocol.security_descriptor import AccessAllowedAce, AccessDeniedAce, SMB2CreateSDBuffer
        from smbprotocol.tree import TreeConnect

        session = smbclient.register_session(host, **kw)  # the pool's, logged in already
        parts = unc.lstrip("\\").split("\\")
        tree = TreeConnect(session, "\\\\" + "\\".join(parts[:2]))
        tree.connect()
        try:
            handle = Open(tree, "\\".join(parts[2:]))
            handle.create(ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.READ_CONTROL,
                          FileAttributes.FILE_ATTRIBUTE_NORMAL,
                          ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
                          CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
            try:
                req = SMB2QueryInfoRequest()
                req["info_type"] = InfoType.SMB2_0_INFO_SECURITY
                req["output_buffer_length"] = SD_BYTES
                req["additional_information"] = (InfoAdditionalInformation.OWNER_SECURTIY_INFORMATION  # sic
                                                 | InfoAdditionalInformation.GROUP_SECURITY_INFORMATION
                                                 | InfoAdditionalInformation.DACL_SECURITY_INFORMATION)
                req["file_id"] = handle.file_id
                sent = session.connection.send(req, sid=session.session_id, tid=tree.tree_connect_id)
                response = session.connection.receive(sent)
            finally:
                handle.close()
        finally:
            tree.disconnect()
        info = SMB2QueryInfoResponse()
        info.unpack(response["data"].get_value())
        sd = SMB2CreateSDBuffer()
        sd.unpack(info["buffer"].get_value())
        dacl = sd.get_dacl()
        if dacl is None:
            return None
        aces: list[Ace] = []
        for ace in dacl["aces"].get_value():
            if isinstance(ace, (AccessAllowedAce, AccessDeniedAce)):
                aces.append(Ace(isinstance(ace, AccessAllowedAce), str(ace["sid"]), int(ace["mask"].get_value()),
                                int(ace["ace_flags"].get_value())))
            elif isinstance(ace, bytes) and ace[:1] and ace[0] in DENY_OBJECT_TYPES:
                aces.append(Ace(False, "", READS))  # a deny smbprotocol cannot parse: of anyone not granted before
            # else an allow ACE it cannot parse (object, callback ACEs: not on a share's files): fewer readers
        return aces
    except (ImportError, AttributeError, TypeError, KeyError, IndexError) as exc:
        raise RightsUnreadable(f"smbprotocol's security descriptor query: {type(exc).__name__}: {exc}") from exc


def _too_large(size: int, max_bytes: int) -> SizeLimit:
    return SizeLimit(f"{size} bytes is over the {max_bytes}-byte limit")


def _status(exc: BaseException) -> int | None:
    """The NTSTATUS of an SMB error (SMBOSError, or a response exception, or one under a ValueError)."""
    for e in (exc, exc.__cause__):
        status = getattr(e, "ntstatus", None) if isinstance(e, SMBOSError) else getattr(e, "status", None)
        if isinstance(status, int):
            return status
    return None


def _said(exc: BaseException) -> str:
    if isinstance(exc, SMBOSError) and exc.strerror:
        return str(exc.strerror)
    return str(exc) or type(exc).__name__
