"""Small things a user meets with the command line, each once a defect: changing watched folders and
exclusions with and without a daemon, a home that is a file, messages that say what happened."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from .conftest import CLI
from .daemon_fixture import DaemonProcess

pytestmark = pytest.mark.slow  # daemons


def config(home: Path) -> dict:
    path = home / "config" / "config.toml"
    return tomllib.loads(path.read_text()) if path.exists() else {}


@pytest.fixture
def running(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("a note about kestrels\n")
    d = DaemonProcess(tmp_path / "dhome", [docs]).start()
    yield d, CLI(d.home), docs
    d.stop()


def test_exclude_add_twice_without_a_daemon_keeps_the_pattern(cli: CLI):
    for _ in range(2):
        assert cli.run("exclude", "add", "*.iso").stdout.strip() == "*.iso"
    assert config(cli.home)["exclude"] == ["*.iso"]
    cli.run("exclude", "remove", "*.iso")
    assert config(cli.home)["exclude"] == []


def test_exclude_add_twice_through_the_daemon_keeps_the_pattern(running):
    d, cli, _ = running
    for _ in range(2):
        cli.run("exclude", "add", "*.iso")
    assert d.call("exclude_list") == {"exclude": ["*.iso"]} and config(d.home)["exclude"] == ["*.iso"]


@pytest.mark.parametrize("pattern", ["", "  "])
def test_an_empty_exclusion_is_refused_and_not_written(cli: CLI, pattern: str):
    p = cli.run("exclude", "add", pattern, check=False)
    assert p.returncode == 2 and "empty pattern" in p.stderr
    assert "exclude" not in config(cli.home)


def test_an_empty_exclusion_is_refused_by_the_daemon_too(running):
    from deskdex.errors import BadArgs

    d, _, _ = running
    with pytest.raises(BadArgs, match="empty"):
        d.call("exclude_add", pattern="")
    assert d.call("exclude_list") == {"exclude": []}


def test_removing_what_is_not_there_says_so(cli: CLI, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = cli.run("watch", "remove", str(elsewhere), check=False)
    assert p.returncode == 1 and f"not a watched folder: {elsewhere}" in p.stderr
    p = cli.run("exclude", "remove", "*.nothing", check=False)
    assert p.returncode == 1 and "not an excluded pattern: *.nothing" in p.stderr


def test_removing_a_folder_the_daemon_does_not_watch_says_so(running, tmp_path: Path):
    d, cli, docs = running
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = cli.run("watch", "remove", str(elsewhere), check=False)
    assert p.returncode == 1 and "not a watched folder" in p.stderr and "Traceback" not in p.stderr
    assert [f["path"] for f in d.call("watch_list")["folders"]] == [str(docs)]


def test_resume_says_it_resumed(running):
    d, cli, _ = running
    assert cli.run("pause").stdout.strip() == "indexing paused (state: paused)"
    out = cli.run("resume").stdout.strip()
    assert out.startswith("indexing resumed") and "paused" not in out.split("resumed", 1)[1], out
    d.wait_for(lambda st: st["state"] == "idle" and not st["paused"], what="idle after resume")


@pytest.mark.parametrize("command", [["search", "x"], ["status"], ["daemon", "--once"], ["index", "."],
                                     ["watch", "list"], ["dups"]])
def test_a_home_that_is_a_file_is_a_clear_error(tmp_path: Path, command: list[str]):
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("I am a file\n")
    p = CLI(not_a_folder).run(*command, check=False)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and f"cannot use {not_a_folder} as a folder" in p.stderr, p.stderr
    assert not_a_folder.read_text() == "I am a file\n"


def test_convert_of_a_folder_says_it_is_a_folder(cli: CLI, tmp_path: Path):
    p = cli.run("convert", str(tmp_path), check=False)
    assert p.returncode == 2 and f"{tmp_path} is a folder" in p.stderr
    p = cli.run("convert", str(tmp_path / "nope.txt"), check=False)
    assert p.returncode == 2 and "no such file" in p.stderr
