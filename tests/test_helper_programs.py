"""Helper programs run by converters (converters/helpers.py): a missing one is `helper_missing` naming
what to install, a failing one `corrupt` with its own words, a member's bytes reach it as a file."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from deskdex.converters import Source, helpers
from deskdex.errors import CorruptFile, HelperMissing, TimeLimit


def test_missing_helper_names_what_to_install() -> None:
    need = helpers.Need(("deskdex-no-such-helper", "deskdex-nor-this"), "apt-get install deskdex-helpers")
    assert not need.found()
    with pytest.raises(HelperMissing) as err:
        helpers.run(need, ["{}"], Source("file:///x", "x", data=b"x"))
    assert err.value.reason == "helper_missing"
    assert "apt-get install deskdex-helpers" in str(err.value) and "deskdex-no-such-helper" in str(err.value)


def test_any_one_of_the_named_programs_does(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes(b"first line\n")
    need = helpers.Need(("deskdex-no-such-helper", "cat"), "coreutils")
    assert need.found()
    assert helpers.run(need, ["{}"], Source.from_path(f)) == b"first line\n"


def test_a_members_bytes_reach_the_helper_as_a_file_named_with_the_suffix() -> None:
    member = Source("file:///a.zip#b.ps", "b.ps", data=b"bytes of a member")
    out = helpers.run(helpers.Need(("sh",), "dash"), ["-c", 'printf "%s:" "${1##*.}"; cat "$1"', "sh", "{}"],
                      member, suffix=".ps")
    assert out == b"ps:bytes of a member"


def test_a_failing_helper_is_corrupt_with_its_last_words() -> None:
    need = helpers.Need(("sh",), "dash")
    with pytest.raises(CorruptFile, match="sh: Syntax Error: no page 1"):
        helpers.run(need, ["-c", "echo noise >&2; echo 'Syntax Error: no page 1' >&2; exit 3"],
                    Source("file:///x", "x", data=b""))
    # An exit code the helper uses for "no text", allowed by its converter, is not a failure.
    assert helpers.run(need, ["-c", "echo partial; exit 3"], Source("file:///x", "x", data=b""), ok_codes=(0, 3)) == b"partial\n"


def test_a_helper_past_its_time_is_killed() -> None:
    with pytest.raises(TimeLimit, match="sleep ran over 0.3 s"):
        helpers.run(helpers.Need(("sleep",), "coreutils"), ["30"], Source("file:///x", "x", data=b""), timeout=0.3)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("deskdex"))


def test_a_helpers_folder_is_removed_when_its_worker_is_killed_at_the_time_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool kills a worker past its time limit with SIGKILL, which skips the ``finally`` that
    removes the helper's temporary folder: the folder's guard removes it once the worker is dead.
    The helper is tests/misbehaving.py's sleeping one; TMPDIR is a folder of this test's, given to
    a fork server started for it (the workers' environment is the fork server's)."""
    from deskdex.converters import Limits
    from deskdex.converters.isolation import WorkerPool, release_fork_server

    from .misbehaving import OVERRIDES

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    for n in ("helper.txt", "after.txt"):
        (tmp_path / n).write_text(f"content of {n} with enough words to be text")
    release_fork_server()
    try:
        with WorkerPool(1, Limits(time_seconds=3.0), idle=False, overrides=OVERRIDES) as pool:
            results = {s.name: o for s, o in pool.map(Source.from_path(tmp_path / n) for n in ("helper.txt", "after.txt"))}
    finally:
        release_fork_server()
    assert results["helper.txt"][0].reason == "timeout" and results["after.txt"][0].ok, results
    deadline = time.monotonic() + 10  # the guard removes it as soon as it sees its worker gone
    while _leftovers(tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _leftovers(tmp) == [], "a helper's temporary folder outlived its killed worker"


def test_a_helpers_folder_is_removed_after_a_run_and_its_guard_ended(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    member = Source("file:///a.zip#b.ps", "b.ps", data=b"bytes of a member")
    out = helpers.run(helpers.Need(("sh",), "dash"), ["-c", 'cat "$1"; echo "$TMPDIR"', "sh", "{}"], member, suffix=".ps")
    assert out.startswith(b"bytes of a member") and str(tmp_path).encode() in out
    assert _leftovers(tmp_path) == []
    with pytest.raises(TimeLimit):
        helpers.run(helpers.Need(("sleep",), "coreutils"), ["30"], member, timeout=0.3)
    assert _leftovers(tmp_path) == []
    guards = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith(b"/bin/sh\0-c\0trap")
              and str(tmp_path).encode() in _cmdline(p)]  # this test's: others may run helpers meanwhile
    assert guards == [], "a guard outlived its run"


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""
