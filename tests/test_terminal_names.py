"""File names and titles anyone can choose, holding terminal escape sequences, newlines and
bidirectional overrides: what people read shows them escaped, JSON keeps them exact, and
``--paths -0`` gives ``xargs -0`` the exact names. Through a real daemon, and through ``deskdex
index`` and the index read directly; on a pipe, and on a real terminal (a pty)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from deskdex.clients.render import print_results, raw_path, terminal_safe

from .conftest import DESKDEX, ROOT
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]

# Each holds the word "zebrafish" and a word of its own (distinct texts: no two are duplicates).
FOUND = {
    "osc\x1b]0;pwned\x07.txt": "window title",   # OSC 0: retitles the terminal window
    "clear\x1b[2J\x1b[H.txt": "screen cleared",  # CSI 2J: clears the screen
    "two\nlines.txt": "newline inside",           # breaks a listing a line a path
    "bidi\u202egnp.exe": "override reversed",    # shows as "bidiexe.png"
    "csi\u009b31m.txt": "single csi",           # C1 CSI, one character
    "tab\tand\x7fdel.txt": "tab delete",
    "plain name.md": "# A \u009b2J \u202etitle\n\nmarkdown heading",  # the title holds the controls
}
# Exact copies of each other: a duplicate cluster for `deskdex dups`.
COPIES = ("copy\x1b[31m one.txt", "copy\x1b]8;;https:evil\x1b\\ two.txt")
BROKEN = "broken\x1b[2J.pdf"  # fails to convert: listed by `status --failures` and the index summary
UNSAFE = (b"\x1b", b"\x07", b"\x7f", "\u009b".encode(), "\u202e".encode())


@pytest.fixture(params=["daemon", "index"])
def docs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Path, bytes]]:
    """The hostile folder, indexed by a running daemon or by `deskdex index` (whose output comes
    third, empty with a daemon)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, (name, body) in enumerate(FOUND.items()):
        (folder / name).write_text(f"{body}\n\nzebrafish {i} " + "lorem " * i + "\n")
    for name in COPIES:
        (folder / name).write_text("walrus " * 40 + "the same text in both copies\n")
    (folder / BROKEN).write_bytes(b"%PDF-1.4 not really\n")
    home = tmp_path / "home"
    if request.param == "index":
        p = run(home, "index", str(folder))
        assert p.returncode == 0, p.stderr
        yield folder, home, p.stdout
        return
    daemon = DaemonProcess(home, [folder]).start()
    try:
        yield folder, home, b""
    finally:
        daemon.stop()


def env_for(home: Path, color: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return dict(env, DESKDEX_HOME=str(home), **({} if color else {"NO_COLOR": "1"}))


def run(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([DESKDEX, *args], capture_output=True, env=env_for(home), cwd=ROOT, timeout=120)


def on_terminal(home: Path, *args: str) -> bytes:
    """What ``deskdex ARGS`` writes on a terminal (a pty), colour and links on."""
    master, slave = os.openpty()
    p = subprocess.Popen([DESKDEX, *args], stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                         env=env_for(home, color=True), cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the program ended and the terminal's other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return b"".join(chunks)


def assert_readable(out: bytes) -> None:
    """Nothing in ``out`` a terminal would act on: no escape, bell, DEL, C1 control or override."""
    for raw in UNSAFE:
        assert raw not in out, (raw, out)


def test_search_shows_names_escaped_and_json_keeps_them(docs: tuple[Path, Path, bytes]):
    folder, home, _ = docs
    p = run(home, "search", "zebrafish", "--limit", "50")
    assert p.returncode == 0, p.stderr
    assert_readable(p.stdout)
    listing = p.stdout.decode()
    for name in FOUND:
        assert terminal_safe(str(folder / name)) in listing
    assert "osc\\x1b]0;pwned\\x07.txt" in listing and "two\\nlines.txt" in listing and "bidi\\u202egnp" in listing
    assert "A \\x9b2J \\u202etitle" in listing  # the title of the Markdown file
    *entries, summary = listing.splitlines()
    assert summary == f"{len(FOUND)} results"
    assert all(re.match(r"\d+\. |   ", line) for line in entries), entries  # no name broke a line
    hits = json.loads(run(home, "search", "zebrafish", "--limit", "50", "--json").stdout)["hits"]
    assert sorted(h["path"] for h in hits) == sorted(str(folder / n) for n in FOUND)


def test_search_on_a_terminal_shows_names_escaped(docs: tuple[Path, Path, bytes]):
    folder, home, _ = docs
    out = on_terminal(home, "search", "zebrafish", "--limit", "50")
    assert b"\x1b[1m" in out  # colour: the terminal is real
    for sequence in (b"\x1b]0;pwned", b"\x1b[2J", b"\x07", "\u009b".encode(), "\u202e".encode()):
        assert sequence not in out
    paths = on_terminal(home, "search", "zebrafish", "--limit", "50", "--paths")
    assert_readable(paths)
    assert sorted(paths.decode().split("\r\n")[:-1]) == sorted(terminal_safe(str(folder / n)) for n in FOUND)


def test_paths_on_a_pipe_are_exact_and_null_terminated_for_xargs(docs: tuple[Path, Path, bytes]):
    folder, home, _ = docs
    expected = sorted(os.fsencode(folder / n) for n in FOUND)
    lines = run(home, "search", "zebrafish", "--limit", "50", "--paths").stdout
    assert sorted(lines.split(b"\n")[:-1]) == sorted(b for p in expected for b in p.split(b"\n"))
    for flag in ("-0", "--null"):
        out = run(home, "search", "zebrafish", "--limit", "50", "--paths", flag).stdout
        assert out.endswith(b"\0") and sorted(out.split(b"\0")[:-1]) == expected
    # As a user pipes it: xargs -0 reaches every file, the one with a newline in its name too.
    piped = subprocess.run(f"'{DESKDEX}' search zebrafish --limit 50 --paths -0 | xargs -0 cat", shell=True,
                           capture_output=True, env=env_for(home), timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.count(b"zebrafish") == len(FOUND)


def test_null_without_paths_is_a_usage_error(docs: tuple[Path, Path, bytes]):
    _, home, _ = docs
    p = run(home, "search", "zebrafish", "-0")
    assert p.returncode == 2 and b"--paths" in p.stderr and p.stdout == b""


def test_dups_shows_names_escaped_and_json_keeps_them(docs: tuple[Path, Path, bytes]):
    folder, home, _ = docs
    p = run(home, "dups")
    assert p.returncode == 0, p.stderr
    assert_readable(p.stdout)
    for name in COPIES:
        assert terminal_safe(str(folder / name)) in p.stdout.decode()
    clusters = json.loads(run(home, "dups", "--json").stdout)["clusters"]
    assert [sorted(d["path"] for d in c["documents"]) for c in clusters] == [sorted(str(folder / n) for n in COPIES)]


def test_status_and_index_show_names_escaped(docs: tuple[Path, Path, bytes]):
    folder, home, index_output = docs
    assert_readable(index_output)
    p = run(home, "status", "--failures")
    assert p.returncode == 0, p.stderr
    assert_readable(p.stdout)
    assert terminal_safe(str(folder / BROKEN)) in p.stdout.decode()
    failures = json.loads(run(home, "status", "--failures", "--json").stdout)["failures"]
    assert [f["path"] for f in failures] == [str(folder / BROKEN)]


def test_terminal_safe_escapes_what_a_terminal_acts_on():
    assert terminal_safe("a\x1b[2Jb\x07\n\t\r\x00\x7f") == "a\\x1b[2Jb\\x07\\n\\t\\r\\x00\\x7f"
    assert terminal_safe("\u009b\u202e\u2066\u200f\u2028") == "\\x9b\\u202e\\u2066\\u200f\\u2028"
    assert terminal_safe("line\n\tindented\x1b", lines=True) == "line\n\tindented\\x1b"
    kept = "Ünïcode 東京 «quoted» \\ back-slash, emoji \U0001f600, Arabic مرحبا"
    assert terminal_safe(kept) == kept


def test_exact_bytes_of_a_name_that_is_not_utf8(tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]):
    """The index shows such a name with U+FFFD and keeps its bytes in the URI, percent-encoded
    (converters/source.py): --paths prints the bytes, so that xargs reaches the file."""
    hit = {"uri": "file:///tmp/bad%FFname%0A.txt", "path": "/tmp/bad\ufffdname\n.txt", "source": "files"}
    member = {"uri": "file:///tmp/a%FF.zip#inner/b.txt", "path": "/tmp/a\ufffd.zip", "source": "files"}
    assert raw_path(hit) == b"/tmp/bad\xffname\n.txt" and raw_path(member) == b"/tmp/a\xff.zip"
    assert raw_path({"uri": "file:///x/%EF%BF%BD.txt", "path": "/x/\ufffd.txt"}) == "/x/\ufffd.txt".encode()
    print_results({"total": 2, "hits": [hit, member]}, paths=True, null=True)  # type: ignore[list-item]
    assert capfdbinary.readouterr().out == b"/tmp/bad\xffname\n.txt\0/tmp/a\xff.zip\0"


def test_paths_null_reaches_a_file_whose_name_is_not_utf8(tmp_path: Path):
    folder = tmp_path / "docs"
    folder.mkdir()
    raw = os.fsencode(folder) + b"/bad\xffname.txt"
    with open(raw, "wb") as f:
        f.write(b"ocelot\n")
    home = tmp_path / "home"
    assert run(home, "index", str(folder)).returncode == 0
    assert run(home, "search", "ocelot", "--paths", "-0").stdout == raw + b"\0"
    assert run(home, "search", "ocelot", "--paths").stdout == raw + b"\n"
    assert "bad\ufffdname.txt" in run(home, "search", "ocelot").stdout.decode()
