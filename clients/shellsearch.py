"""``deskdex shell-search``: deskdex's hits in the desktop's own search box, over the session bus.

One process answers both desktops on one object: GNOME Shell's ``org.gnome.Shell.SearchProvider2``
(the Activities search) and KDE Plasma's ``org.kde.krunner1`` (KRunner). The bus starts it when the
shell first asks (D-Bus activation, from the ``.service`` file ``deskdex service install`` writes)
and it leaves after ``--idle`` seconds without a call, so nothing runs while nobody searches.

It searches through the running daemon on one kept socket connection, with the ``search`` op the
command line uses; without a daemon every search answers nothing and says why once in the log
(stderr, which the bus passes to the journal). The shell gets empty results, never a D-Bus error,
for a query the daemon refuses (hostile syntax, too long): a search box is typed into key by key.

The bus library is jeepney (pure Python, blocking I/O): one thread reads a call, answers it and reads
the next, which is all a search box needs and lets a receive timeout be the idle timer.
"""

from __future__ import annotations

# Imported by every command's parser (clients/cli.py): subprocess and shutil, 6 ms, only where used.

import argparse
import logging
import os
import re
import sys
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any

from deskdex.errors import DaemonUnavailable, DeskdexError, QueryError
from deskdex.protocol import MAX_QUERY

from .ask import daemon_sockets, home_of
from .client import Client
from .render import raw_path

if TYPE_CHECKING:
    from jeepney import Message

    from deskdex.protocol import SearchHit

    from .subcommands import Subcommands

logger = logging.getLogger(__name__)

BUS_NAME = "org.deskdex.SearchProvider"
OBJECT_PATH = "/org/deskdex/SearchProvider"
GNOME = "org.gnome.Shell.SearchProvider2"
KRUNNER = "org.kde.krunner1"
IDLE_ENV = "DESKDEX_SHELL_SEARCH_IDLE"
IDLE_DEFAULT = 30.0  # seconds: longer than a pause between keys, short enough to hold no memory for long
LIMIT = 20  # hits a search asks for: GNOME shows 3 to 5 per provider, KRunner about 10
KEPT = 500  # hits remembered by id, for the metas and the activation that follow a search
# KRunner's actions on each match (id, text, icon name); "" (Enter on the match) is "open".
ACTIONS = (("open", "Open", "document-open"), ("open-folder", "Open containing folder", "folder-open"),
           ("copy-path", "Copy path", "edit-copy"))
# KRunner's match types: 100 (ExactMatch) sorts first, 30 (PossibleMatch) is a search engine's hit.
POSSIBLE_MATCH = 30

INTROSPECTION = f"""<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<node>
 <interface name="{GNOME}">
  <method name="GetInitialResultSet"><arg type="as" name="terms" direction="in"/>
   <arg type="as" name="results" direction="out"/></method>
  <method name="GetSubsearchResultSet"><arg type="as" name="previous_results" direction="in"/>
   <arg type="as" name="terms" direction="in"/><arg type="as" name="results" direction="out"/></method>
  <method name="GetResultMetas"><arg type="as" name="identifiers" direction="in"/>
   <arg type="aa{{sv}}" name="metas" direction="out"/></method>
  <method name="ActivateResult"><arg type="s" name="identifier" direction="in"/>
   <arg type="as" name="terms" direction="in"/><arg type="u" name="timestamp" direction="in"/></method>
  <method name="LaunchSearch"><arg type="as" name="terms" direction="in"/>
   <arg type="u" name="timestamp" direction="in"/></method>
 </interface>
 <interface name="{KRUNNER}">
  <method name="Actions"><arg type="a(sss)" name="matches" direction="out"/></method>
  <method name="Match"><arg type="s" name="query" direction="in"/>
   <arg type="a(sssida{{sv}})" name="matches" direction="out"/></method>
  <method name="Run"><arg type="s" name="matchId" direction="in"/><arg type="s" name="actionId" direction="in"/></method>
  <method name="Config"><arg type="a{{sv}}" name="config" direction="out"/></method>
 </interface>
 <interface name="org.freedesktop.DBus.Introspectable">
  <method name="Introspect"><arg type="s" name="xml_data" direction="out"/></method>
 </interface>
 <interface name="org.freedesktop.DBus.Peer">
  <method name="Ping"/>
 </interface>
</node>
"""

# The freedesktop icon theme's generic names, by the first half of a MIME type: what a theme without
# the type's own icon (application-pdf, ...) shows instead.
_GENERIC_ICONS = {"text": "text-x-generic", "image": "image-x-generic", "audio": "audio-x-generic",
                  "video": "video-x-generic", "font": "font-x-generic"}


_generic_icons: dict[str, str] | None = None


def icon_names(mime: str) -> tuple[str, str]:
    """The icon theme's names for a MIME type, its own first, then its generic fallback: the Icon
    Naming Specification's (``application/pdf`` is ``application-pdf``), the generic one the shared
    MIME database names (``x-office-document``), else that of the type's first half."""
    mime = mime.split(";", 1)[0].strip().lower()
    own = mime.replace("/", "-") if re.fullmatch(r"[a-z0-9.+-]+/[a-z0-9.+-]+", mime) else ""
    generic = _mime_generic_icons().get(mime) or _GENERIC_ICONS.get(mime.split("/", 1)[0], "application-x-generic")
    return (own or generic), generic


def _mime_generic_icons() -> dict[str, str]:
    """The shared MIME database's ``generic-icons`` (shared-mime-info), read once: the user's, then
    the system's data folders, the first naming a type winning."""
    global _generic_icons
    if _generic_icons is None:
        _generic_icons = {}
        data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
        data_dirs = (os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
        for folder in [data_home, *data_dirs]:
            try:
                with open(os.path.join(folder, "mime", "generic-icons"), encoding="utf-8") as f:
                    for line in f:
                        mime, sep, name = line.strip().partition(":")
                        if sep:
                            _generic_icons.setdefault(mime, name)
            except (OSError, UnicodeDecodeError):
                continue
    return _generic_icons


def add_command(subparsers: Subcommands, common_parent: argparse.ArgumentParser) -> None:
    """Add ``deskdex shell-search`` to the CLI's subcommands."""
    s = subparsers.add_parser(
        "shell-search", parents=[common_parent],
        help="answer GNOME Shell's and KRunner's searches over D-Bus (started by the bus; docs/desktop.md)",
        description="Serve org.gnome.Shell.SearchProvider2 and org.kde.krunner1 on the session bus as "
                    f"{BUS_NAME}, answering through the running daemon, and exit when idle. The bus starts "
                    "it from the file `deskdex service install` writes; run by hand it is the same service.")
    s.add_argument("--idle", type=float, metavar="SECONDS", default=None,
                   help=f"exit after this long without a call (default {IDLE_DEFAULT:g}, or ${IDLE_ENV})")
    s.set_defaults(func=cmd_shell_search)


def cmd_shell_search(args: argparse.Namespace) -> int:
    # The command line logs errors only; a bus service's log is its stderr (the journal), where
    # "no daemon" is what someone wondering why the shell shows nothing needs to read.
    logging.getLogger("deskdex").setLevel(logging.DEBUG if getattr(args, "verbose", False) else logging.INFO)
    idle = args.idle
    if idle is None:
        try:
            idle = float(os.environ.get(IDLE_ENV) or IDLE_DEFAULT)
        except ValueError:
            print(f"deskdex shell-search: ${IDLE_ENV} must be a number of seconds, not "
                  f"{os.environ[IDLE_ENV]!r}", file=sys.stderr)
            return 2
    if not 0 < idle <= 86400:  # nan and inf too
        print("deskdex shell-search: --idle must be more than 0 seconds and at most a day (86400)", file=sys.stderr)
        return 2
    home = home_of(args)
    given = getattr(args, "home", None)
    searcher = Searcher(daemon_sockets(given, "search"))
    return serve(Provider(searcher, home.runtime_dir, ["--home", given] if given else []), idle)


class Searcher:
    """Searches through the daemon on one connection, made again when the daemon comes back, and
    remembers the hits it returned by id (a hit's uri) for the calls about them that follow."""

    def __init__(self, socket_paths: list[str]) -> None:
        # The home's daemon, then the system daemon for a user who has none (clients/ask.py): the
        # first that answers is kept, and all are tried again once it stops answering.
        self.socket_paths = socket_paths
        self.socket_path = socket_paths[0]
        self._client: Client | None = None
        self._down = False  # the daemon was found missing: logged once until it answers again
        self.hits: OrderedDict[str, SearchHit] = OrderedDict()

    def search(self, terms: list[str], limit: int = LIMIT) -> list[SearchHit]:
        query = " ".join(t for t in terms if t.strip())[:MAX_QUERY]
        if not query:
            return []
        try:
            hits = self._ask(query, limit)
        except QueryError:
            # What the shell passes is what was typed, search syntax or not ('c++', 'a:', '"'):
            # its words alone are the search the person meant.
            words = " ".join(re.findall(r"\w+", query))
            try:
                hits = self._ask(words, limit) if words else []
            except DeskdexError as exc:
                # The log (the journal) never holds what was typed: only why it found nothing.
                logger.info("a search the query language refuses, also as its words alone: %s", exc)
                return []
        except DeskdexError as exc:
            logger.warning("a search failed: %s", exc)
            return []
        for hit in hits:
            self.hits[hit["uri"]] = hit
            self.hits.move_to_end(hit["uri"])
        while len(self.hits) > KEPT:
            self.hits.popitem(last=False)
        return hits

    def _ask(self, query: str, limit: int) -> list[SearchHit]:
        for attempt in (1, 2):  # a kept connection the daemon closed (restarted) is made again once
            try:
                if self._client is None:
                    self._client = self._connect()
                result = self._client.call("search", query=query, limit=limit, snippets=False)
            except DaemonUnavailable as exc:
                self.close()
                if attempt == 2 or "not running" in str(exc):
                    if not self._down:
                        logger.warning("no results: %s", exc)
                    self._down = True
                    return []
                continue
            if self._down:
                logger.info("the daemon answers again on %s", self.socket_path)
            self._down = False
            hits: list[SearchHit] = result["hits"]
            return hits
        return []

    def _connect(self) -> Client:
        for path in self.socket_paths:
            try:
                client = Client(path, timeout=10.0)
            except DaemonUnavailable:
                if path == self.socket_paths[-1]:
                    raise
                continue
            self.socket_path = path
            return client
        raise DaemonUnavailable("no daemon to ask")  # no socket given: not reached from the command

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class Provider:
    """The methods of both interfaces, each taking and returning D-Bus values as jeepney has them."""

    def __init__(self, searcher: Searcher, runtime_dir: str, home_args: list[str] | None = None) -> None:
        self.searcher = searcher
        self.runtime_dir = runtime_dir
        self.home_args = home_args or []  # ["--home", HOME] for the tray it starts, as this service was given

    # org.gnome.Shell.SearchProvider2
    def initial(self, terms: list[str]) -> list[str]:
        return [h["uri"] for h in self.searcher.search(terms)]

    def subsearch(self, previous: list[str], terms: list[str]) -> list[str]:
        # The shell asks again with more terms as they are typed. A search of them all, not a filter of
        # the previous ids: every term must match, so it narrows as the interface asks, and a hit
        # ranked past the previous ones' limit can come first for the longer query.
        return self.initial(terms)

    def metas(self, ids: list[str]) -> list[dict[str, tuple[str, str]]]:
        metas = []
        for rid in ids:
            hit = self.searcher.hits.get(rid)
            if hit is None:
                logger.info("no metas for unknown result id %r", rid)
                continue
            own, generic = icon_names(hit["mime"])
            metas.append({"id": ("s", rid), "name": ("s", _name(hit)), "description": ("s", _described(hit)),
                          "clipboardText": ("s", _target(hit)),  # what Ctrl+C on the row copies (recent GNOME)
                          # a GThemedIcon's string form: the theme's own icon, else the generic one
                          "gicon": ("s", f". GThemedIcon {own} {generic}" if own != generic else generic)})
        return metas

    def activate(self, rid: str) -> None:
        hit = self.searcher.hits.get(rid)
        if hit is None:
            logger.warning("cannot open unknown result id %r (not among the hits this service returned)", rid)
            return
        _open(_target(hit))

    def launch_search(self, terms: list[str]) -> None:
        """deskdex's own window at these terms: the daemon's web page where it serves one (it takes the
        query), else the tray's search window (``deskdex tray --search``: the tray running already
        shows it, else a new tray starts)."""
        query = " ".join(terms)
        from deskdex.web import read_url

        served = read_url(self.runtime_dir)
        if served is not None:
            from urllib.parse import urlencode

            url = str(served["url"])
            _open(url + ("&" if "?" in url else "?") + urlencode({"q": query}))
            return
        # --search=QUERY, one argument: a query may begin with "-". Not logged: what was typed stays out of the log.
        logger.info("no web page served: the tray's search window shows the search")
        _spawn([_deskdex(), "tray", *self.home_args, f"--search={query}"])

    # org.kde.krunner1
    def match(self, query: str) -> list[tuple[str, str, str, int, float, dict[str, tuple[str, Any]]]]:
        hits = self.searcher.search([query], limit=10)
        top = max((h["score"] for h in hits), default=1.0) or 1.0
        return [(h["uri"], _name(h), icon_names(h["mime"])[0], POSSIBLE_MATCH,
                 # KRunner sorts every runner's matches by relevance (0..1): deskdex's order, scaled
                 max(0.0, min(1.0, 0.7 * h["score"] / top)),
                 {"subtext": ("s", _described(h)), "urls": ("as", [h["uri"]]),
                  "actions": ("as", [a[0] for a in ACTIONS if a[0] != "open-folder" or h["source"] != "web"])})
                for h in hits]

    def actions(self) -> list[tuple[str, str, str]]:
        return list(ACTIONS)

    def run(self, rid: str, action: str) -> None:
        hit = self.searcher.hits.get(rid)
        if hit is None:
            logger.warning("cannot run %r on unknown match id %r", action, rid)
            return
        target = _target(hit)
        if action in ("", "open"):
            _open(target)
        elif action == "open-folder":
            _open(os.path.dirname(target) if hit["source"] != "web" else target)
        elif action == "copy-path":
            _copy(target)
        else:
            logger.warning("unknown KRunner action %r", action)

    def config(self) -> dict[str, tuple[str, Any]]:
        return {"MinLetterCount": ("i", 2)}


def serve(provider: Provider, idle: float) -> int:
    """Own BUS_NAME on the session bus and answer calls until ``idle`` seconds pass without one."""
    from jeepney import MatchRule
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection

    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not address:
        print("deskdex shell-search: no session bus: $DBUS_SESSION_BUS_ADDRESS is not set (a desktop session "
              "sets it, and its bus starts this command when GNOME Shell or KRunner asks)", file=sys.stderr)
        return 1
    try:
        conn = open_dbus_connection(address)
    except (OSError, ValueError, RuntimeError) as exc:  # nothing listening, not an address, a transport but unix:
        print(f"deskdex shell-search: cannot reach the session bus at {address!r} ({exc})", file=sys.stderr)
        return 1
    # Every call, also one read while waiting for the bus's reply to RequestName (the bus delivers the
    # call that activated us as soon as we own the name), is queued here, not dropped.
    with conn, conn.filter(MatchRule(type="method_call"), queue=deque()) as calls:
        # DO_NOT_QUEUE (4): a second copy (the bus activated one, someone ran another) leaves at once
        reply = conn.send_and_get_reply(message_bus.RequestName(BUS_NAME, 4), timeout=10)
        if reply.body[0] != 1:  # 1: the primary owner
            print(f"deskdex shell-search: {BUS_NAME} is already served on this bus", file=sys.stderr)
            return 0
        logger.info("serving %s on the session bus (exits after %g s idle)", BUS_NAME, idle)
        try:
            while True:
                try:
                    msg = conn.recv_until_filtered(calls, timeout=idle)
                except TimeoutError:
                    logger.info("idle for %g s: exiting", idle)
                    break
                _answer(conn, provider, msg)
            # A call may reach us between the timeout and the bus knowing we left: give up the name
            # first, then answer what is already queued, so no caller waits for a reply never sent.
            conn.send_and_get_reply(message_bus.ReleaseName(BUS_NAME), timeout=10)
            while True:
                try:
                    msg = conn.recv_until_filtered(calls, timeout=0.05)
                except TimeoutError:
                    break
                _answer(conn, provider, msg)
        except ConnectionError as exc:  # the bus went away (the session ended)
            logger.info("the session bus closed: %s", exc)
        finally:
            provider.searcher.close()
    return 0


def _answer(conn: Any, provider: Provider, msg: Message) -> None:
    from jeepney import HeaderFields, MessageFlag, MessageType, new_error

    if msg.header.message_type != MessageType.method_call:
        return  # signals (NameAcquired, ...) and replies: nothing to answer
    fields = msg.header.fields
    interface, member = fields.get(HeaderFields.interface), fields.get(HeaderFields.member)
    signature = fields.get(HeaderFields.signature, "")
    if fields.get(HeaderFields.path) != OBJECT_PATH:
        reply = new_error(msg, "org.freedesktop.DBus.Error.UnknownObject", "s",
                          (f"no object at {fields.get(HeaderFields.path)}; deskdex serves {OBJECT_PATH}",))
    else:
        try:
            reply = _call(provider, msg, interface, member, signature)
        except Exception as exc:  # one bad call must not end the service for the next ones
            logger.exception("%s.%s failed", interface, member)
            reply = new_error(msg, "org.freedesktop.DBus.Error.Failed", "s", (f"{member}: {exc}",))
    if reply is not None and not msg.header.flags & MessageFlag.no_reply_expected:
        conn.send(reply)


# The methods by (interface, name): the D-Bus signature each takes, and what answers it with which signature.
_METHODS: dict[tuple[str, str], tuple[str, str]] = {
    (GNOME, "GetInitialResultSet"): ("as", "as"),
    (GNOME, "GetSubsearchResultSet"): ("asas", "as"),
    (GNOME, "GetResultMetas"): ("as", "aa{sv}"),
    (GNOME, "ActivateResult"): ("sasu", ""),
    (GNOME, "LaunchSearch"): ("asu", ""),
    (KRUNNER, "Match"): ("s", "a(sssida{sv})"),
    (KRUNNER, "Actions"): ("", "a(sss)"),
    (KRUNNER, "Run"): ("ss", ""),
    (KRUNNER, "Config"): ("", "a{sv}"),
    ("org.freedesktop.DBus.Introspectable", "Introspect"): ("", "s"),
    ("org.freedesktop.DBus.Peer", "Ping"): ("", ""),
}


def _call(provider: Provider, msg: Message, interface: str | None, member: str | None, signature: str) -> Message:
    from jeepney import new_error, new_method_return

    # A call may leave out its interface; the member names of the two interfaces do not collide.
    key = next((k for k in _METHODS if k[1] == member and interface in (None, k[0])), None)
    if key is None:
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s",
                         (f"no method {interface}.{member} at {OBJECT_PATH}",))
    takes, gives = _METHODS[key]
    if signature != takes:
        return new_error(msg, "org.freedesktop.DBus.Error.InvalidArgs", "s",
                         (f"{member} takes ({takes}), not ({signature})",))
    body = msg.body
    name = key[1]
    out: tuple[Any, ...] = ()
    if name == "GetInitialResultSet":
        out = (provider.initial(list(body[0])),)
    elif name == "GetSubsearchResultSet":
        out = (provider.subsearch(list(body[0]), list(body[1])),)
    elif name == "GetResultMetas":
        out = (provider.metas(list(body[0])),)
    elif name == "ActivateResult":
        provider.activate(body[0])
    elif name == "LaunchSearch":
        provider.launch_search(list(body[0]))
    elif name == "Match":
        out = (provider.match(body[0]),)
    elif name == "Actions":
        out = (provider.actions(),)
    elif name == "Run":
        provider.run(body[0], body[1])
    elif name == "Config":
        out = (provider.config(),)
    elif name == "Introspect":
        out = (INTROSPECTION,)
    return new_method_return(msg, gives or None, out)


def _name(hit: SearchHit) -> str:
    return hit["title"] or os.path.basename(hit["path"].rstrip("/")) or hit["uri"]


def _where(hit: SearchHit) -> str:
    """The hit's place as a person reads it: a file's path with ~ for the home folder, a page's URL."""
    if hit["source"] == "web":
        return hit["uri"]
    home = os.path.expanduser("~")
    path = hit["path"]
    return "~" + path[len(home):] if home != "/" and path.startswith(home + "/") else path


def _described(hit: SearchHit) -> str:
    """The line under a hit's name: its place, and for one found by meaning alone (it holds none of
    the words typed: docs/search.md, "Meaning") that it is related, so that no one reads it as a match."""
    return f"related by meaning · {_where(hit)}" if hit.get("related") else _where(hit)


def _target(hit: SearchHit) -> str:
    """What opening a hit opens: a web page's URL, a file (a member: its container) by its exact name."""
    return hit["uri"] if hit["source"] == "web" else os.fsdecode(raw_path(hit))


def _deskdex() -> str:
    import shutil

    script = os.path.join(os.path.dirname(sys.executable), "deskdex")
    return script if os.path.exists(script) else shutil.which("deskdex") or "deskdex"


def _open(target: str) -> None:
    """Open with the desktop's default application: xdg-open asks the desktop (gio, kde-open, ...)."""
    import shutil

    opener = shutil.which("xdg-open")
    if opener is None:
        logger.warning("no xdg-open to open %s (Debian: xdg-utils)", target)
        return
    _spawn([opener, target])


def _copy(text: str) -> None:
    """Put ``text`` on the clipboard with the first tool this session has (Wayland, then X11)."""
    import shutil
    import subprocess

    tools = (["wl-copy"], ["xclip", "-selection", "clipboard"], ["xsel", "--clipboard", "--input"])
    for argv in tools:
        if shutil.which(argv[0]) and (argv[0] != "wl-copy" or os.environ.get("WAYLAND_DISPLAY")):
            try:
                subprocess.run(argv, input=text.encode(), timeout=5, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                return
            except (OSError, subprocess.SubprocessError) as exc:
                logger.warning("%s could not copy: %s", argv[0], exc)
    logger.warning("no clipboard tool (wl-copy, xclip or xsel) to copy %s", text)


def _spawn(argv: list[str]) -> None:
    """Start a program that outlives this service (which may exit idle while it runs): through a shell
    that leaves it in the background and exits, so init, not this service, reaps it."""
    import subprocess

    try:
        subprocess.run(["/bin/sh", "-c", '"$@" </dev/null >/dev/null 2>&1 &', "sh", *argv],
                       timeout=10, check=True, start_new_session=True)
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("could not start %s: %s", argv[0], exc)
