"""End to end through the real ``deskdex`` command: index, search, show, status, re-index."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import CLI, DESKDEX, make_docx, make_pdf, worded


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    t = tmp_path / "docs"
    (t / "letters").mkdir(parents=True)
    (t / "letters" / "plumber.txt").write_text("Dear plumber,\n\nthe kitchen tap drips every night.\n")
    (t / "garden.html").write_text("<html><head><title>Garden notes</title></head><body><h1>Roses</h1>"
                                   "<p>Prune the roses in early spring.</p></body></html>")
    make_pdf(t / "budget.pdf", "Household budget", "Alex Doe", ["Electricity costs rose sharply this winter."])
    make_docx(t / "trip.docx", "Trip plan", "Kim Roe", "Itinerary", ["We take the ferry to the lighthouse island."])
    # What the default exclusions must leave out.
    (t / ".hidden").mkdir()
    (t / ".hidden" / "secret.txt").write_text("lighthouse keeper secret")
    (t / "node_modules" / "pkg").mkdir(parents=True)
    (t / "node_modules" / "pkg" / "readme.txt").write_text("lighthouse module readme")
    return t


def paths(results: dict) -> list[str]:
    return [os.path.basename(h["path"]) for h in worded(results)]


@pytest.mark.slow
def test_index_then_search_show_status(cli: CLI, tree: Path):
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["indexed"] == 4 and summary["failed"] == 0

    res = cli.json("search", "lighthouse")
    assert paths(res) == ["trip.docx"]
    hit = res["hits"][0]
    for key in ("uri", "path", "title", "snippet", "score", "mime", "mtime", "size"):
        assert key in hit
    assert hit["title"] == "Trip plan" and hit["path"] == str(tree / "trip.docx")
    assert hit["uri"] == (tree / "trip.docx").as_uri()
    assert "lighthouse" in hit["snippet"].lower() and hit["size"] == (tree / "trip.docx").stat().st_size

    assert paths(cli.json("search", "electricity")) == ["budget.pdf"]
    assert paths(cli.json("search", "prune", "roses")) == ["garden.html"]
    assert paths(cli.json("search", "kitchen")) == ["plumber.txt"]
    # Stemming and title boost: "rose" finds the page titled about roses first.
    assert cli.json("search", "roses")["total"] >= 1

    out = cli.run("show", str(tree / "garden.html")).stdout
    assert out.startswith("<doc uri=") and "<h level=\"1\">Roses</h>" in out

    st = cli.json("status")
    assert st["documents"] == 4 and st["failed"] == 0
    assert st["index_bytes"] > 0 and st["store_bytes"] > 0

    text = cli.run("search", "ferry").stdout
    assert "Trip plan" in text and "[ferry]" in text


@pytest.mark.slow
def test_limit_and_plain_output(cli: CLI, tree: Path):
    for i in range(5):
        (tree / f"note{i}.txt").write_text(f"common word number {i}")
    cli.run("index", str(tree))
    res = cli.json("search", "common", "--limit", "2")
    assert res["total"] == 5 and len(res["hits"]) == 2


@pytest.mark.slow
def test_reindex_converts_only_what_changed(cli: CLI, tree: Path):
    cli.run("index", str(tree))
    again = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert (again["indexed"], again["unchanged"], again["removed"]) == (0, 4, 0)

    (tree / "letters" / "plumber.txt").write_text("Dear electrician,\n\nthe lights flicker.\n")
    (tree / "garden.html").unlink()
    shutil.move(tree / "trip.docx", tree / "letters" / "trip-moved.docx")
    s = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert s["indexed"] == 1 and s["reused"] == 1 and s["removed"] == 2 and s["unchanged"] == 1, s

    assert paths(cli.json("search", "electrician")) == ["plumber.txt"]
    assert cli.json("search", "plumber kitchen", "--words")["total"] == 0
    assert cli.json("search", "prune", "--words")["total"] == 0
    assert paths(cli.json("search", "lighthouse")) == ["trip-moved.docx"]
    assert cli.json("status")["documents"] == 3


def _imported(stderr: str) -> set[str]:
    """The modules a command imported, from PYTHONPROFILEIMPORTTIME's lines on its stderr."""
    return set(re.findall(r"^import time:.*\|\s+(\S+)\s*$", stderr, re.MULTILINE))


HEAVY_FOR_NOTHING = {"numpy", "tokenizers", "importlib.metadata"}


@pytest.mark.slow
def test_a_run_that_finds_nothing_changed_loads_no_model(cli: CLI, tree: Path):
    """With meaning on (the default), the first run embeds passages: it loads numpy and the
    tokenizer. A run that finds nothing changed embeds nothing and records no new failure: it
    loads neither, nor importlib.metadata (issue 33: 0.54 -> 0.30 s on 10,000 notes)."""
    env = {"PYTHONPROFILEIMPORTTIME": "1"}
    first = cli.run("index", str(tree), "--json", env=env)
    assert json.loads(first.stdout)["indexed"] == 4
    assert {"numpy", "tokenizers"} <= _imported(first.stderr)
    again = cli.run("index", str(tree), "--json", env=env)
    assert (json.loads(again.stdout)["indexed"], json.loads(again.stdout)["unchanged"]) == (0, 4)
    loaded = _imported(again.stderr)
    # The list is real: it holds what walked the folder. (Modules loaded by importlib.import_module,
    # as core/lazy.py loads the indexer, are not listed: numpy, tokenizers and importlib.metadata
    # are each loaded by an import statement.)
    assert "deskdex.pipeline.scan" in loaded
    assert loaded & HEAVY_FOR_NOTHING == set()
    # and one changed file among unchanged ones is still converted and embedded
    (tree / "letters" / "plumber.txt").write_text("Dear electrician,\n\nthe lights flicker in the hall.\n")
    third = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert (third["indexed"], third["unchanged"]) == (1, 3), third
    assert paths(cli.json("search", "electrician")) == ["plumber.txt"]


@pytest.mark.slow
def test_bad_files_are_recorded_and_skipped(cli: CLI, tree: Path):
    (tree / "junk.txt").write_bytes(bytes(range(256)) * 64)
    (tree / "broken.docx").write_bytes(b"PK\x03\x04not really a docx")
    good = (tree / "budget.pdf").read_bytes()
    (tree / "cut.pdf").write_bytes(good[:400])
    s = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert s["indexed"] == 4 and s["failed"] == 3
    assert s["failed_by_reason"] == {"corrupt": 3}
    assert {os.path.basename(f["path"]) for f in s["failures"]} == {"junk.txt", "broken.docx", "cut.pdf"}
    st = cli.json("status")
    assert st["documents"] == 4 and st["failed_by_reason"] == {"corrupt": 3}
    # Nothing else was lost.
    assert paths(cli.json("search", "lighthouse")) == ["trip.docx"]
    # A failed file is still findable by its name.
    assert "broken.docx" in paths(cli.json("search", "broken"))
    out = cli.run("status", "--failures").stdout
    assert "junk.txt" in out and "binary" in out


@pytest.mark.slow
def test_permission_denied_is_recorded(cli: CLI, tree: Path):
    locked = tree / "private.txt"
    locked.write_text("cannot read me")
    locked.chmod(0)
    args = ["index", str(tree), "--json"]
    if os.geteuid() == 0:
        # Root reads anything; the same process without the capabilities that let it ignore
        # file modes is refused like any user (a real kernel check, nothing mocked).
        if not shutil.which("setpriv"):
            pytest.skip("running as root and no setpriv to drop CAP_DAC_OVERRIDE")
        caps = "-dac_override,-dac_read_search"
        p = subprocess.run(["setpriv", "--bounding-set", caps, "--inh-caps", caps,
                            DESKDEX, *args],
                           capture_output=True, text=True, env=dict(os.environ, DESKDEX_HOME=str(cli.home)),
                           cwd=Path(__file__).parent.parent, timeout=120)
        assert p.returncode == 0, p.stderr
        s = json.loads(p.stdout)
    else:
        s = json.loads(cli.run(*args).stdout)
    assert s["failed_by_reason"] == {"unreadable": 1}
    assert "permission denied" in s["failures"][0]["message"].lower()
    assert s["failures"][0]["path"] == str(locked)
    assert s["indexed"] == 4


@pytest.mark.slow
def test_second_writer_gets_a_clear_message(cli: CLI, tree: Path):
    cli.run("index", str(tree))
    lock = cli.home / "data" / "writer.lock"
    with open(lock, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = cli.run("index", str(tree), check=False)
    assert p.returncode == 3
    assert "another deskdex process" in p.stderr and "Traceback" not in p.stderr
    # The index is intact and usable afterwards.
    assert paths(cli.json("search", "lighthouse")) == ["trip.docx"]


def test_search_before_any_index_explains(cli: CLI):
    p = cli.run("search", "anything", check=False)
    assert p.returncode == 1 and "deskdex index" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_home_option_and_environment_variable(tmp_path: Path, tree: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    CLI(a).run("index", str(tree / "letters"))
    # --home overrides DESKDEX_HOME.
    assert CLI(b).run("status", "--home", str(a), "--json").stdout.count('"documents": 1') == 1
    assert (a / "data" / "catalog.sqlite").exists() and not (b / "data" / "catalog.sqlite").exists()
    assert oct((a / "data").stat().st_mode & 0o777) == "0o700"
    assert oct((a / "data" / "catalog.sqlite").stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow
def test_bad_query_is_a_message_not_a_traceback(cli: CLI, tree: Path):
    cli.run("index", str(tree))
    p = cli.run("search", 'title:"unclosed', check=False)
    assert p.returncode == 1 and "query" in p.stderr and "Traceback" not in p.stderr


def test_formats_lists_mime_types_extensions_and_libraries(cli: CLI):
    formats = cli.json("formats")["formats"]
    pdf = next(f for f in formats if "application/pdf" in f["mimes"])
    assert "pdf" in pdf["extensions"] and pdf["library"]
    assert any("text/html" in f["mimes"] for f in formats)


@pytest.mark.slow
def test_convert_prints_tagged_text_plain_text_and_main_content(cli: CLI, tmp_path: Path):
    page = tmp_path / "page.html"
    page.write_text("<html><head><title>Soup</title></head><body><nav>Home About</nav>"
                    "<h1>Tomato soup</h1><p>Simmer for twenty minutes.</p></body></html>")
    tagged = cli.run("convert", str(page)).stdout
    assert tagged.startswith("<doc ") and '<p boilerplate="1">Home About</p>' in tagged
    text = cli.run("convert", str(page), "--format", "text").stdout
    assert "Home About" in text and "Simmer for twenty minutes." in text
    main = cli.run("convert", str(page), "--format", "main").stdout
    assert "Home About" not in main and "Simmer for twenty minutes." in main
    assert not (cli.home / "data" / "catalog.sqlite").exists()  # nothing indexed
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 truncated")
    p = cli.run("convert", str(bad), check=False)
    assert p.returncode == 1 and "bad.pdf" in p.stderr and "corrupt" in p.stderr


@pytest.mark.slow
def test_search_paths_sort_and_offset(cli: CLI, tree: Path):
    cli.run("index", str(tree))
    lines = cli.run("search", "lighthouse OR electricity OR prune", "--paths").stdout.splitlines()
    assert sorted(lines) == sorted(str(tree / n) for n in ("trip.docx", "budget.pdf", "garden.html"))
    by_size = cli.json("search", "lighthouse OR electricity OR prune", "--sort", "size")
    sizes = [h["size"] for h in by_size["hits"]]
    assert sizes == sorted(sizes, reverse=True)
    second = cli.json("search", "lighthouse OR electricity OR prune", "--sort", "size", "--offset", "1")
    assert [h["path"] for h in second["hits"]] == [h["path"] for h in by_size["hits"][1:]]
    p = cli.run("search", "lighthouse", "--limit", "0", check=False)
    assert p.returncode == 2 and "must be 1 or more" in p.stderr


@pytest.mark.slow
def test_new_schema_rebuilds_the_index_from_the_catalog_without_converting(cli: CLI, tree: Path):
    import sqlite3

    cli.run("index", str(tree))
    db = sqlite3.connect(cli.home / "data" / "catalog.sqlite")
    db.execute("UPDATE meta SET value='0' WHERE key='schema'")
    db.commit()
    db.close()
    p = cli.run("search", "lighthouse", check=False)
    assert p.returncode == 1 and "rebuild" in p.stderr
    s = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert s["indexed"] == 0 and s["unchanged"] == 4
    assert paths(cli.json("search", "lighthouse")) == ["trip.docx"]


@pytest.mark.slow
def test_file_deleted_mid_run_is_reported_and_leaves_no_ghost(tmp_path: Path, tree: Path):
    from deskdex.converters.limits import Limits
    from deskdex.pipeline.indexer import Indexer
    from deskdex.index import Collection

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        files = indexer.scan([str(tree)])
        (tree / "garden.html").unlink()  # after the scan, before its turn
        s = indexer.sync([str(tree)], files)
        assert s.failed == {"vanished": 1} and s.indexed == 3
        assert [f[0] for f in s.failures] == [str(tree / "garden.html")]
        assert coll.get((tree / "garden.html").as_uri()) is None


@pytest.mark.slow
def test_show_a_member_of_an_archive(cli: CLI, tmp_path: Path):
    import zipfile

    d = tmp_path / "z"
    d.mkdir()
    with zipfile.ZipFile(d / "bundle.zip", "w") as z:
        z.writestr("notes/inside.txt", "a note about the walrus inside a zip\n")
    cli.run("index", str(d))
    hit = cli.json("search", "walrus")["hits"][0]
    assert hit["uri"] == (d / "bundle.zip").as_uri() + "#notes/inside.txt"
    out = cli.run("show", hit["uri"]).stdout
    assert out.startswith(f'<doc uri="{hit["uri"]}"') and "walrus" in out


@pytest.mark.slow
def test_colour_only_on_a_terminal_and_never_with_no_color(cli: CLI, tree: Path):
    import pty

    cli.run("index", str(tree))

    def on_tty(env_extra: dict) -> str:
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        env.update(DESKDEX_HOME=str(cli.home), **env_extra)
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(Path(__file__).parent.parent)
            os.execve(DESKDEX, [DESKDEX, "search", "lighthouse"], env)
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        return out.decode()

    assert "\x1b[" in on_tty({})
    assert "\x1b[" not in on_tty({"NO_COLOR": "1"})
    assert "\x1b[" not in cli.run("search", "lighthouse").stdout  # a pipe


@pytest.mark.slow
def test_open_hands_the_nth_result_to_the_desktop(cli: CLI, tree: Path, tmp_path: Path):
    # No desktop session exists on a test machine: a stand-in xdg-open records what it was given.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "opened.txt"
    (bin_dir / "xdg-open").write_text(f"#!/bin/sh\necho \"$1\" > {record}\n")
    (bin_dir / "xdg-open").chmod(0o755)
    cli.run("index", str(tree))
    cli.run("search", "lighthouse", "--open", "1", env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert record.read_text().strip() == str(tree / "trip.docx")
    p = cli.run("search", "lighthouse", "--open", "5", check=False)
    assert p.returncode == 1 and "only 1 results" in p.stderr


def test_service_status_from_the_cli(cli: CLI):
    st = cli.json("service", "status")
    assert st["kind"] in ("systemd", "launchd", "windows") and "installed" in st
