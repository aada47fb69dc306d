"""What a new user meets first (issue 31, "First contact"), through the installed ``deskdex``
command: a search while the first index is being built says how far it is (command line and web
page), a mistyped command names the right one, a query beginning with - points to --, the tray
without a display says so in one line, a crawl of a private address says how to allow it and
``crawl add`` keeps that choice, and the fast path finds the daemon without XDG_RUNTIME_DIR.

Nothing is mocked: real daemons, a real site on 127.0.0.1, real HTTP to the web page."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from .conftest import CLI, DESKDEX
from .daemon_fixture import DaemonProcess
from .webcrawl_site import SiteServer

pytestmark = pytest.mark.slow  # daemons

FILES = 1500  # more than a daemon converts in the half second before its duty cycle first rests
EARLY = 5  # indexed before the daemon starts; counted done, and waiting until its reconcile passes them
HOW_FAR = re.compile(r"the index is being built: ([\d,]+) of ([\d,]+) files found so far done")


def _count(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture(scope="module")
def building(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, CLI]]:
    """A daemon in its first index: cpu_budget = 1 makes it rest about 99 times as long as it
    worked (at least 50 s) once it has worked half a second, with most of its files still to do.
    A few files were indexed before (`deskdex index`), so that a search finds something meanwhile:
    the daemon commits what it converts only in batches."""
    root = tmp_path_factory.mktemp("building")
    docs = root / "docs"
    (docs / "early").mkdir(parents=True)
    for i in range(EARLY):
        (docs / "early" / f"early{i}.txt").write_text(f"kestrel sighting number {i}, an early one\n")
    CLI(root / "home").run("index", str(docs / "early"))
    for i in range(FILES):
        (docs / f"note{i:04}.txt").write_text(f"kestrel sighting number {i}\n")
    d = DaemonProcess(root / "home", [docs], extra_config='cpu_budget = 1\nweb = "127.0.0.1:0"\n').start(wait=False)
    try:
        d.wait_for(lambda st: st["state"] == "indexing" and st["queue"] > 0, what="the first index under way")
        yield d, CLI(d.home)
    finally:
        d.stop()


def test_a_search_during_the_first_index_says_how_far_it_is(building: tuple[DaemonProcess, CLI]):
    d, cli = building
    status = d.call("status")
    assert status["state"] == "indexing", status  # still resting: the test's premise holds
    # The fast path (the daemon answers) and the full command line (an abbreviation: argparse reads it).
    for extra in ((), ("--lim", "5")):
        out = cli.run("search", "zeppelinnotthere", *extra).stdout
        assert out.startswith("no results yet: the index is being built: "), out
        assert out.rstrip().endswith("more may match when it is done") and len(out.splitlines()) == 1, out
        m = HOW_FAR.search(out)
        assert m, out
        done, found = _count(m[1]), _count(m[2])
        assert EARLY <= done < found <= FILES + 2 * EARLY, out
    # With hits: the listing, then the same note below the count.
    out = cli.run("search", "kestrel").stdout
    assert re.search(r"^\d+ results? .*more may match when it is done\)$", out.splitlines()[-1]), out
    assert HOW_FAR.search(out.splitlines()[-1]), out
    answer = cli.json("search", "kestrel")
    indexing = answer["indexing"]
    assert indexing["first"] is True and indexing["state"] == "indexing", indexing
    assert indexing["waiting"] > 0 and indexing["done"] + indexing["waiting"] <= FILES + 2 * EARLY, indexing
    # The web page: a line above the hits, in the page's own words.
    url = json.loads((d.home / "run" / "web.json").read_text())["url"]
    with httpx.Client(base_url=url.split("/?", 1)[0], timeout=60) as web:
        assert web.get(url).status_code == 303  # the token's cookie
        page = web.get("/results", params={"q": "zeppelinnotthere"})
        assert page.status_code == 200, page.text
        line = re.search(r'<p class="indexing" id="indexing" role="status">([^<]*)</p>', page.text)
        assert line and HOW_FAR.search(line[1].lower()), page.text
        assert page.text.index('id="indexing"') < page.text.index('id="summary"')  # above the count
        assert web.get("/api/search", params={"q": "kestrel"}).json().get("indexing", {}).get("first") is True


@pytest.mark.parametrize("indexing, said", [
    ({"state": "scanning", "first": True, "done": 0, "waiting": 0}, "the index is being built: looking for files"),
    ({"state": "scanning", "first": True, "done": 1200, "waiting": 3},
     "the index is being built: looking for files (1,200 done so far)"),
    ({"state": "indexing", "first": True, "done": 120, "waiting": 2880},
     "the index is being built: 120 of 3,000 files found so far done"),
    ({"state": "indexing", "first": False, "done": 5000, "waiting": 2},
     "the index is being brought up to date: 5,000 of 5,002 files found so far done"),
    ({"state": "indexing", "first": True, "done": None, "waiting": 1}, "the index is being built: 1 file to go"),
])
def test_how_far_the_indexing_is_said(indexing: dict[str, object], said: str):
    """The wording of each state the daemon answers with (the CLI's and the web page's); a daemon
    brought up to date or scanning is not held in that state long enough to meet it above."""
    from deskdex.protocol import indexing_said

    assert indexing_said(indexing) == said  # type: ignore[arg-type]


def test_a_search_without_a_daemon_says_no_results_alone(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("a heron by the river\n")
    cli = CLI(tmp_path / "home")
    cli.run("index", str(docs))
    assert cli.run("search", "zeppelinnotthere").stdout == "no results\n"
    assert "indexing" not in cli.json("search", "heron")


def _one_line_error(p: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert p.returncode == code and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    return p.stderr


@pytest.mark.parametrize("args, said", [
    (["serach", "budget"], "deskdex: serach is not a deskdex command; did you mean: search"),
    (["staus"], "deskdex: staus is not a deskdex command; did you mean: status"),
    (["--home", "/nonexistent/h", "-v", "crawll", "list"], "did you mean: crawl"),
    (["frobnicate"], "deskdex: frobnicate is not a deskdex command (deskdex --help lists them)"),
])
def test_a_mistyped_command_names_the_right_one(cli: CLI, args: list[str], said: str):
    assert said in _one_line_error(cli.run(*args, check=False))


@pytest.mark.parametrize("args, suggested", [
    (["search", "-budget"], "deskdex search -- -budget"),
    (["search", "budget", "-draft", "--limit", "3"], "deskdex search -- budget -draft"),
    (["search", "-report's"], "deskdex search -- '-report'\"'\"'s'"),  # safe to paste in a shell
])
def test_a_query_beginning_with_a_dash_points_to_double_dash(cli: CLI, args: list[str], suggested: str):
    err = _one_line_error(cli.run(*args, check=False))
    assert err.startswith(f"deskdex: {args[1] if args[1].startswith('-') else args[2]} is not an option"), err
    assert err.rstrip().endswith(suggested), err


def test_the_suggested_double_dash_search_runs(building: tuple[DaemonProcess, CLI]):
    _, cli = building
    p = cli.run("search", "--", "kestrel", "-sighting")
    assert p.returncode == 0 and "results" in p.stdout, p.stderr


def test_an_unknown_long_option_keeps_argparse_s_message(cli: CLI):
    p = cli.run("search", "budget", "--limt", "3", check=False)
    assert p.returncode == 2 and "unrecognized arguments: --limt" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("platform", [None, "xcb", "wayland"])
def test_the_tray_without_a_display_says_so_in_one_line(cli: CLI, platform: str | None):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    if platform:
        env["QT_QPA_PLATFORM"] = platform
    p = subprocess.run([DESKDEX, "tray"], env={**env, "DESKDEX_HOME": str(cli.home)}, capture_output=True,
                       text=True, timeout=60)
    err = _one_line_error(p, code=1)
    assert err.startswith("deskdex tray: no display to show the tray on") and "desktop session" in err, err
    assert ("WAYLAND_DISPLAY" in err) == (platform != "xcb") and ("DISPLAY is" in err or "DISPLAY and" in err)


def test_a_crawl_of_a_private_address_says_how_to_allow_it_and_add_keeps_the_choice(cli: CLI):
    config = cli.home / "config" / "config.toml"

    def sites() -> list[dict[str, object]]:
        return tomllib.loads(config.read_text()).get("crawl", {}).get("sites", []) if config.exists() else []

    with SiteServer(kind="topic", pages=12) as site:
        url = site.url("/")
        for args in (["crawl", "add", url], ["crawl", url, "--max-pages", "3"]):
            err = _one_line_error(cli.run(*args, check=False))
            assert "127.0.0.1 is a private or loopback address" in err and "--allow-private" in err, err
            assert "crawl.allow_private_addresses = true" in err, err
        assert sites() == [] and site.paths() == []  # nothing written, nothing fetched
        cli.run("crawl", "add", url, "--allow-private", "--max-pages", "4")
        assert sites() == [{"url": url, "scope": "host", "max_pages": 4, "allow_private": True}]
        assert "allow_private=True" in cli.run("crawl", "list").stdout
        # The next runs, without the flag: the site's own crawl and the configured ones (the
        # daemon's upkeep plans each site the same way, webcrawl/runs.py plan).
        for args in (["crawl", url, "--max-pages", "3"], ["crawl"]):
            summary = json.loads(cli.run(*args, "--delay", "0.01", "--json").stdout)
            assert summary["stored"] >= 1 and "private_address" not in summary["failed"], summary
        # Another private site is still refused: the choice was this site's alone.
        other = url.replace("127.0.0.1", "127.0.0.2")
        assert "127.0.0.2 is a private" in _one_line_error(cli.run("crawl", "add", other, check=False))


# Runs the installed entry point, then reports whether the full command line or platformdirs was
# loaded: neither, when the fast path found the daemon's socket.
PROBE = ("import sys\nfrom deskdex.clients import launch\nsys.argv = ['deskdex', *sys.argv[1:]]\nrc = launch.main()\n"
         "sys.stderr.write('\\nLOADED=' + ','.join(m for m in ('deskdex.clients.cli', 'platformdirs') "
         "if m in sys.modules))\nsys.exit(rc)")


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A HOME whose socket path (HOME/.local/share/deskdex/run/deskdex.sock) fits in the 108 bytes
    of a Unix socket's address, which pytest's own temporary folders may not."""
    home = Path(tempfile.mkdtemp(prefix="dx"))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_without_xdg_runtime_dir_the_fast_path_finds_the_daemon(short_home: Path):
    """ssh without pam_systemd, cron, containers: no XDG_RUNTIME_DIR (and no /run/user/UID here,
    or one: both sides agree either way), no DESKDEX_HOME: the platform's folders under HOME."""
    tmp_path = short_home
    env = {k: v for k, v in os.environ.items() if k != "DESKDEX_HOME" and not k.startswith("XDG_")}
    env.update(HOME=str(tmp_path), NO_COLOR="1")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("an osprey over the lake\n")
    (tmp_path / ".config" / "deskdex").mkdir(parents=True)
    (tmp_path / ".config" / "deskdex" / "config.toml").write_text(f"folders = [{json.dumps(str(docs))}]\n")
    daemon = subprocess.Popen([DESKDEX, "daemon"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180  # its first file starts the converters: slow on a loaded machine
        while True:
            st = subprocess.run([DESKDEX, "status", "--json"], env=env, capture_output=True, text=True, timeout=60)
            if st.returncode == 0 and json.loads(st.stdout).get("daemon") and json.loads(st.stdout)["state"] == "idle":
                break
            assert time.monotonic() < deadline and daemon.poll() is None, st.stdout + st.stderr
            time.sleep(0.2)
        p = subprocess.run([sys.executable, "-I", "-c", PROBE, "search", "osprey", "--paths"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout == f"{docs / 'a.txt'}\n", p.stdout + p.stderr
        assert p.stderr.rsplit("LOADED=", 1)[1] == "", f"the fast path was not taken: {p.stderr}"
        assert subprocess.run([DESKDEX, "search", "osprey", "--paths"], env=env, capture_output=True, text=True,
                              timeout=60).stdout == p.stdout
    finally:
        daemon.terminate()
        daemon.wait(60)
