"""Helper programs run by converters (converters/helpers.py): a missing one is `helper_missing` naming
what to install, a failing one `corrupt` with its own words, a member's bytes reach it as a file."""

from __future__ import annotations

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
