"""Settings cannot break deskdex (issue 28): a value a command would save is checked first (and
refused with the file unchanged); a value read from the file that does not fit is reported and
its default used (a pattern that does not compile: left out); a daemon started on, or running
beside, a config file that is not TOML keeps its last good settings and says why in status; a
hand edit of the file is applied by the running daemon without any command; an enterprise-mode
daemon reports and ignores listen and broker instead of stopping. Everything here is real: the
installed command, its daemon, files on disk, Unix accounts for the enterprise case."""

from __future__ import annotations

import os
import operator
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deskdex import settings
from deskdex.errors import ConfigError
from deskdex.paths import Home

from .conftest import DESKDEX
from .daemon_fixture import BUSY_TIMEOUT, CLIENT_TIMEOUT, DaemonProcess

pytestmark = pytest.mark.timeout(BUSY_TIMEOUT)  # the daemon's waits are measured in daemon_fixture.Patience


def deskdex(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DESKDEX, "--home", str(home), *args], capture_output=True, text=True,
                          timeout=CLIENT_TIMEOUT, env=dict(os.environ, NO_COLOR="1"))


def config(home: Path) -> Path:
    return home / "config" / "config.toml"


# -- what a command saves ------------------------------------------------------------------------------------
def test_exclude_add_of_a_pattern_that_does_not_compile_is_refused_and_nothing_saved(tmp_path):
    home = tmp_path / "home"
    p = deskdex(home, "exclude", "add", "!")
    assert p.returncode != 0 and "'!'" in p.stderr and "gitignore" in p.stderr, p
    assert not config(home).exists()  # nothing written, not even an empty file
    assert deskdex(home, "exclude", "add", "*.iso").returncode == 0
    before = config(home).read_bytes()
    for patterns in (["!"], ["*.bak", "[z-a]"], ["\\"]):  # one bad pattern: none of them is saved
        p = deskdex(home, "exclude", "add", *patterns)
        assert p.returncode != 0 and "is not a gitignore-style pattern" in p.stderr, p
        assert config(home).read_bytes() == before
    # The file still works for every command that reads it.
    p = deskdex(home, "exclude", "list")
    assert p.returncode == 0 and p.stdout.split() == ["*.iso"], p
    # One put in by hand is left out when read, and `exclude remove` takes it out of the file.
    config(home).write_text('exclude = ["*.iso", "!"]\n')
    p = deskdex(home, "exclude", "list")
    assert p.returncode == 0 and p.stdout.split() == ["*.iso"], p
    p = deskdex(home, "exclude", "remove", "!")
    assert p.returncode == 0 and p.stdout.split() == ["*.iso"] and "(left out)" in p.stderr, p
    assert settings.read(str(config(home)))["exclude"] == ["*.iso"]  # strict: nothing left that does not fit


def test_the_pattern_check_is_the_scanners_matcher(tmp_path):
    """settings checks a pattern with what the scanner compiles (pipeline/scan.py Spec): a pattern it
    accepts never stops a scan, one it refuses would have."""
    from deskdex.pipeline.scan import Excluder

    for pattern in ("!", "[z-a]", "\\", "a\\", "[[:alpha:]]", "*.iso", "Downloads/", "!keep.txt", "a/**/b", "[ab]c",
                    "\\!x", "#comment", "***"):
        try:
            Excluder([pattern]).excluded("a/b", False)
            scanner_ok = True
        except Exception:
            scanner_ok = False
        try:
            settings.check("exclude", [pattern])
            ok = True
        except ConfigError:
            ok = False
        assert ok == scanner_ok, pattern


def test_an_ignore_file_line_that_does_not_compile_is_left_out_and_the_rest_kept(tmp_path, caplog):
    from deskdex.pipeline.ignore import Rules

    (tmp_path / ".deskdexignore").write_text("# mine\n!\n*.log\n[z-a]\n")
    rules = Rules(str(tmp_path))
    assert rules.excluded("a.log", False) and not rules.excluded("a.txt", False)  # it raised before
    assert "line 2: '!' is not a gitignore-style pattern" in caplog.text and "line 4" in caplog.text


BAD_VALUES = [("workers", -3, "workers", "1 to 256"), ("time_limit", -1, "time_limit", "1 to 86400"),
              ("crawl.delay", -2, "delay", "0 to 3600")]


@pytest.mark.parametrize("name, value, key, allowed", BAD_VALUES)
def test_a_value_out_of_bounds_is_refused_on_save_and_defaulted_on_read(tmp_path, name, value, key, allowed):
    home = Home.resolve(str(tmp_path)).ensure()
    path = Path(home.config_file)
    path.write_text('exclude = ["*.iso"]\n')
    with pytest.raises(ConfigError, match=re.escape(f"{name} must be from {allowed}, not {value}")):
        settings.save(home, {name: value})
    assert path.read_text() == 'exclude = ["*.iso"]\n'
    table, _, _ = name.rpartition(".")
    path.write_text(f"{key} = {value}\n" if not table else f"[{table}]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=re.escape(name)):
        settings.load(home)  # the commands stay strict
    problems: list[str] = []
    cfg = settings.load(home, problems)
    assert operator.attrgetter(name)(cfg.settings) == settings.BY_NAME[name].default
    assert problems == [f"{home.config_file}: {name} must be from {allowed}, not {value} "
                        f"(the default {settings.BY_NAME[name].default!r} is used)"]


def test_every_default_is_within_its_bounds_and_each_bound_is_enforced(tmp_path):
    for s in settings.SETTINGS:
        settings.check(s.name, s.default)  # a default that did not fit would be refused on read
        if s.low is None or s.high is None:
            continue
        step = 1 if s.kind is int else 0.01
        for bad in (s.low - step, s.high + step):
            with pytest.raises(ConfigError, match=re.escape(s.name)):
                settings.check(s.name, s.kind(bad))
        settings.check(s.name, s.kind(s.low))
        settings.check(s.name, s.kind(s.high))


def test_strings_and_items_have_a_shape(tmp_path):
    refused = {"broker": "http://x", "listen": "nohost", "shard": "3/2", "token": "short",
               "converters": {"text/plain": "no function"}, "shards": ["https://:7700"], "folders": [""],
               "accounts": ["a b"], "ocr.languages": ["e n"], "crawl.contact": "",
               "crawl.sites": [{"url": "https://example.org/", "scope": "planet"}]}
    for name, value in refused.items():
        with pytest.raises(ConfigError, match=re.escape(name)):
            settings.check(name, value)
    for name, value in {"broker": "redis://:pw@10.0.0.1:6379/0", "listen": "[::1]:7700", "shard": "1/2",
                        "token": "x" * 16, "converters": {"text/x-log": "mylogs.conv:convert"},
                        "shards": ["/srv/shard1", "https://h:7700"], "crawl.sites": [
                            {"url": "https://example.org/", "scope": "prefix", "max_pages": 3}]}.items():
        settings.check(name, value)


def test_a_list_keeps_its_good_items_when_one_does_not_fit(tmp_path):
    home = Home.resolve(str(tmp_path)).ensure()
    Path(home.config_file).write_text('exclude = ["*.log", "!", "[z-a]", "tmp/"]\n')
    problems: list[str] = []
    assert list(settings.load(home, problems).settings.exclude) == ["*.log", "tmp/"]
    assert len(problems) == 2 and all("(left out)" in p and "exclude" in p for p in problems), problems


@pytest.mark.slow
def test_index_goes_on_without_a_hand_edited_pattern_that_does_not_compile(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "kept.txt").write_text("walrus kept\n")
    (docs / "left.log").write_text("walrus left\n")
    config(home).parent.mkdir(parents=True)
    config(home).write_text('exclude = ["!", "*.log"]\n')
    p = deskdex(home, "index", str(docs), "--no-progress")
    assert p.returncode == 0, p
    assert "exclude: '!' is not a gitignore-style pattern" in p.stderr and "(left out)" in p.stderr
    p = deskdex(home, "search", "walrus", "--paths")
    assert p.returncode == 0 and p.stdout.split() == [str(docs / "kept.txt")], p  # *.log still applies


# -- the daemon --------------------------------------------------------------------------------------------------
def problems_of(daemon: DaemonProcess) -> list[str]:
    return list(daemon.call("status")["settings_problems"])


@pytest.mark.slow
def test_a_daemon_started_on_a_broken_file_runs_on_the_last_good_settings(tmp_path):
    docs, other = tmp_path / "docs", tmp_path / "other"
    docs.mkdir()
    other.mkdir()
    (docs / "a.txt").write_text("narwhal one\n")
    home = tmp_path / "home"
    daemon = DaemonProcess(home, [docs])
    daemon.start()
    try:
        assert problems_of(daemon) == []
    finally:
        assert daemon.stop() == 0
    # A typo in the file (here an unclosed list): it used to stop the daemon at start.
    daemon = DaemonProcess(home, [other])  # writes a config file: the broken one goes over it
    config(home).write_text(f'folders = ["{other}",\nworkers = 2\n')
    daemon.start()
    try:
        status = daemon.call("status")
        assert status["folders"] == [str(docs)]  # the last good settings, not the defaults nor the typo
        [problem] = status["settings_problems"]
        assert str(config(home)) in problem and "line 2" in problem and "last read whole" in problem, problem
        p = deskdex(home, "status")
        assert p.returncode == 0 and "config error: " in p.stdout and "line 2" in p.stdout, p
        daemon.eventually("narwhal", [str(docs / "a.txt")])
    finally:
        assert daemon.stop() == 0


@pytest.mark.slow
def test_a_daemon_follows_hand_edits_of_its_config_file(tmp_path):
    docs, more = tmp_path / "docs", tmp_path / "more"
    docs.mkdir()
    more.mkdir()
    (docs / "a.txt").write_text("okapi alpha\n")
    (docs / "b.log").write_text("okapi beta\n")
    (more / "c.txt").write_text("okapi gamma\n")
    home = tmp_path / "home"
    daemon = DaemonProcess(home, [docs]).start()
    try:
        daemon.eventually("okapi", [str(docs / "a.txt"), str(docs / "b.log")])
        good = config(home).read_text()
        # A valid edit, no command: an exclusion and a new folder take effect.
        edited = good.replace(f'"{docs}"', f'"{docs}", "{more}"') + 'exclude = ["*.log"]\n'
        config(home).write_text(edited)
        daemon.eventually("okapi", [str(docs / "a.txt"), str(more / "c.txt")])
        assert problems_of(daemon) == []
        # A broken edit: the daemon stays up on the last good settings and says what and where.
        config(home).write_text(edited + "workers = \n")
        status = daemon.wait_for(lambda st: bool(st["settings_problems"]), what="the error in status")
        [problem] = status["settings_problems"]
        assert str(config(home)) in problem and "line" in problem and "keeps the settings" in problem, problem
        assert sorted(status["folders"]) == sorted([str(docs), str(more)])
        (more / "d.txt").write_text("okapi delta\n")  # still watching and indexing meanwhile
        daemon.eventually("okapi", [str(docs / "a.txt"), str(more / "c.txt"), str(more / "d.txt")])
        # An edit with a value out of bounds: reported, its default used; the rest applied.
        config(home).write_text(good + "workers = -3\n")
        status = daemon.wait_for(lambda st: any("workers" in p for p in st["settings_problems"]),
                                 what="the bound in status")
        assert any("workers must be from 1 to 256, not -3" in p for p in status["settings_problems"]), status
        daemon.eventually("okapi", [str(docs / "a.txt"), str(docs / "b.log")])  # more dropped, *.log back
        # Fixed again: the error is gone.
        config(home).write_text(good)
        daemon.wait_for(lambda st: st["settings_problems"] == [], what="the error gone")
        p = deskdex(home, "status")
        assert p.returncode == 0 and "config error" not in p.stdout, p
    finally:
        assert daemon.stop() == 0


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="enterprise mode needs root: useradd, the system daemon")
def test_an_enterprise_daemon_reports_and_ignores_listen_and_broker(open_dir):
    from .accounts import Users, missing_tools

    if missing_tools():
        pytest.skip(f"missing {missing_tools()}")
    users = Users()
    daemon = None
    try:
        users.add(users.a)
        home = open_dir / "home"
        daemon = DaemonProcess(home, [], args=("--system",), extra_config=(
            f'accounts = ["{users.a}"]\nlisten = "127.0.0.1:7799"\ntoken = "{"t" * 20}"\n'
            'broker = "redis://127.0.0.1:1/0"\n'))
        daemon.start()  # it used to exit at once: "setting broker: enterprise mode ..."
        problems = problems_of(daemon)
        assert len(problems) == 2, problems
        assert any("listen is not used in enterprise mode" in p for p in problems)
        assert any("broker is not used in enterprise mode" in p for p in problems)
        assert daemon.proc is not None and daemon.proc.poll() is None
    finally:
        if daemon is not None and daemon.proc is not None:
            assert daemon.stop() == 0
        users.remove()


def _one_folder_config(tmp_path: Path) -> Any:
    """The settings a daemon of home ``tmp_path/home`` starts on, its config file watching ``tmp_path/docs``."""
    from deskdex.daemon import configwatch

    home = Home.resolve(str(tmp_path / "home")).ensure()
    folder = tmp_path / "docs"
    folder.mkdir()
    config(tmp_path / "home").write_text(f'folders = ["{folder}"]\n')
    cfg, problems = configwatch.load_for_daemon(home, system=False)
    assert problems == []
    return cfg


def test_a_hand_edit_keeps_the_broker_given_on_the_command_line(tmp_path):
    """``deskdex daemon --broker URL`` with no broker in the file: reading the file again after a hand
    edit applies the edit and keeps the flag's broker (the edit used to drop it, and the daemon then
    said broker had changed). The Daemon object is real; it is not started, as no Redis is needed
    to see which settings it would run on."""
    from deskdex.clients.managing import _with_given
    from deskdex.daemon import configwatch
    from deskdex.daemon.loop import Daemon

    cfg = _one_folder_config(tmp_path)
    folder = tmp_path / "docs"
    daemon = Daemon(_with_given(cfg, {"broker": "redis://127.0.0.1:6399/0"}))
    assert daemon.cfg.settings.broker == "redis://127.0.0.1:6399/0"
    config(tmp_path / "home").write_text(f'folders = ["{folder}"]\nexclude = ["*.log"]\n')
    configwatch.reload(daemon)
    assert list(daemon.cfg.settings.exclude) == ["*.log"]
    assert daemon.cfg.settings.broker == "redis://127.0.0.1:6399/0"
    assert not any("broker" in note for note in daemon.notes), daemon.notes
    daemon.set_excludes(["*.tmp"])  # what `deskdex exclude add` asks a running daemon
    assert list(daemon.cfg.settings.exclude) == ["*.tmp"]
    assert daemon.cfg.settings.broker == "redis://127.0.0.1:6399/0"


def test_an_exclusion_added_while_the_config_file_is_read_again_is_kept(tmp_path):
    """The config watch reads the file again after each save, on its own thread, while the socket's
    ops save it: a reload that read the file just before `exclude add` saved it used to apply the
    older list after the op, and the next op built on that list, so an exclusion the user had added
    was gone from the file and the daemon (the tray's folders window showed it, `exclude list` did
    not). Here one thread reloads without pause while another adds 40 patterns, as the daemon's
    threads would; every pattern must stay. The Daemon object is real and not started."""
    import threading

    from deskdex.daemon import configwatch
    from deskdex.daemon.loop import Daemon

    daemon = Daemon(_one_folder_config(tmp_path))
    done = threading.Event()

    def reload_again_and_again() -> None:
        while not done.is_set():
            configwatch.reload(daemon)

    reloading = threading.Thread(target=reload_again_and_again)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns between any two steps, as on a busy machine
    reloading.start()
    try:
        patterns = [f"*.junk{i}" for i in range(40)]
        for p in patterns:
            daemon.add_exclude(p)
    finally:
        done.set()
        reloading.join()
        sys.setswitchinterval(switch)
    assert list(daemon.cfg.settings.exclude) == patterns
    configwatch.reload(daemon)  # and the file holds them too
    assert list(daemon.cfg.settings.exclude) == patterns
