"""The ``deskdex`` command's first step: ``deskdex search`` answered by a running daemon, with
nothing but built-in C modules loaded; every other command, and a search no daemon answers,
goes on to ``daemon.cli``.

Why: a search through the daemon takes under a millisecond, but importing argparse, json,
platformdirs and the rest of the command line takes longer than the whole search (measured in
docs/search.md, "How fast"). So this module sends the command line as it is and the daemon
parses it with the same parser ``daemon.cli`` uses, runs it and renders the text (the same
rendering too). Whatever the daemon does not take (another command, ``--open``, a bad query,
``--help``) it refuses, and the full command line runs as if this module were not there, so
every error message comes from one place.
"""

from __future__ import annotations

import os
import sys

APP = "deskdex"
ENV = "DESKDEX_HOME"  # one folder for config, data and socket (daemon/paths.py)
SOCKET_NAME = "deskdex.sock"


def main() -> int:
    argv = sys.argv[1:]
    if _command(argv) == "search":
        code = _through_daemon(argv)
        if code is not None:
            return code
    from .cli import main as full

    return full(argv)


def color() -> bool:
    """Colour and links: on a terminal, unless NO_COLOR asks for none (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def socket_path(argv: list[str]) -> str | None:
    """The socket of the daemon ``daemon.cli`` would ask, where finding it costs nothing:
    ``--home`` or $DESKDEX_HOME, else $XDG_RUNTIME_DIR/deskdex. None otherwise (platformdirs
    knows the other cases; the full command line asks it)."""
    home = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--home" and i + 1 < len(argv):
            home = argv[i + 1]
        elif arg.startswith("--home="):
            home = arg[len("--home="):]
    home = home or os.environ.get(ENV)
    if home:
        return os.path.join(os.path.abspath(os.path.expanduser(home)), "run", SOCKET_NAME)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and sys.platform.startswith("linux") and os.path.isabs(runtime):
        return os.path.join(runtime, APP, SOCKET_NAME)
    return None


def _command(argv: list[str]) -> str | None:
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--home":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _through_daemon(argv: list[str]) -> int | None:
    """The exit code once the daemon's answer is printed, or None to run the full command."""
    path = socket_path(argv)
    try:
        import _json
        import _socket

        # The folder holding the socket must be ours alone, as daemon/paths.py makes it: a
        # socket someone else placed could answer with anything.
        st = os.stat(os.path.dirname(path)) if path else None
        if st is None or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        request = '{"op": "cli", "color": %s, "argv": [%s]}\n' % (
            "true" if color() else "false", ", ".join(_json.encode_basestring_ascii(a) for a in argv))
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except (ImportError, OSError, AttributeError):
        return None  # no such module here (not CPython, not Unix) or no socket folder
    try:
        sock.settimeout(30.0)
        sock.connect(path)
        sock.sendall(request.encode("ascii"))
        chunks = []
        while not chunks or not chunks[-1].endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                return None
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        sock.close()
    try:
        reply, _ = _json.make_scanner(_Decoding())(b"".join(chunks).decode("utf-8"), 0)
    except (ValueError, TypeError, StopIteration, UnicodeDecodeError):
        return None
    result = reply.get("result") if isinstance(reply, dict) and reply.get("ok") else None
    if not isinstance(result, dict) or not isinstance(result.get("out"), str):
        return None
    try:
        sys.stdout.write(result["out"])
        sys.stdout.flush()
    except BrokenPipeError:  # `deskdex search x | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return int(result.get("exit", 0))


class _Decoding:
    """What the C scanner of the json package reads its settings from (json.JSONDecoder's
    defaults); using it directly spares importing json.decoder and with it re."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = None
    memo: dict = {}


if __name__ == "__main__":
    sys.exit(main())
