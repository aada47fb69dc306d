"""Documents found by meaning alone are "related": listed after every document holding the query's
words, marked so in the answer and in every client (docs/search.md, "Meaning"), with meaning on by
default. Real indexes built by the installed command; the Python API in a child process as installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deskdex.clients.render import RELATED, count_line, render_hits

from .conftest import CLI
from .test_meaning import names, write_docs


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> CLI:
    """The meaning tests' notes indexed with the default settings: no config file at all."""
    base = tmp_path_factory.mktemp("related")
    docs = write_docs(base / "docs")
    cli = CLI(base / "home")
    cli.run("index", str(docs))
    assert not (cli.home / "config" / "config.toml").exists()
    return cli


def related(results: dict) -> list[bool]:
    return [h["related"] for h in results["hits"]]


def test_meaning_is_on_by_default_and_its_hits_are_marked_related(indexed: CLI):
    res = indexed.json("search", "cooking", "supper")  # words no document holds
    assert names(res)[:1] == ["soup.txt"]
    assert res["hits"] and all(related(res))
    assert res["total"] == len(res["hits"])


def test_related_hits_come_after_every_hit_holding_the_words(indexed: CLI):
    words = indexed.json("search", "cooking", "dinner", "--words")
    both = indexed.json("search", "cooking", "dinner")
    assert names(words) == ["dinner.txt"] and related(words) == [False]
    flags = related(both)
    assert flags[0] is False and True in flags
    assert flags == sorted(flags), "a related hit listed before a hit holding the words"
    assert names(both)[:1] == names(words) and "soup.txt" in names(both)
    assert both["total"] == len(both["hits"]) and both["related"] == flags.count(True)
    assert "related" not in words


def test_every_page_tells_the_same_total(indexed: CLI):
    whole = indexed.json("search", "cooking", "dinner")
    pages = [indexed.json("search", "cooking", "dinner", "--limit", "1", "--offset", str(i))
             for i in range(len(whole["hits"]))]
    assert {p["total"] for p in pages} == {whole["total"]}
    assert [n for p in pages for n in names(p)] == names(whole)
    assert [r for p in pages for r in related(p)] == related(whole)


def test_the_listing_heads_the_related_hits(indexed: CLI):
    out = indexed.run("search", "cooking", "dinner").stdout.splitlines()
    assert out.count(RELATED) == 1
    first = next(i for i, line in enumerate(out) if line.startswith("1. "))
    assert first < out.index(RELATED), "the heading above the hit holding the words"
    assert out[out.index(RELATED) + 1].startswith("2. ")
    # Only related hits: the heading comes first.
    alone = indexed.run("search", "cooking", "supper").stdout.splitlines()
    assert alone[0] == RELATED and alone[1].startswith("1. ")
    n = len(indexed.json("search", "cooking", "dinner")["hits"]) - 1
    assert out[-1] == f"1 result; {n} related by meaning"
    m = len(indexed.json("search", "cooking", "supper")["hits"])
    assert alone[-1] == f"no results, {m} related by meaning"
    assert RELATED not in indexed.run("search", "cooking", "dinner", "--words").stdout


def test_a_word_being_typed_is_searched_by_meaning_as_the_word(indexed: CLI):
    # The tray and the web page send the last word also as a prefix while it is typed.
    typed = json.loads(indexed.run("search", "--json", "--", "cooking (supper OR supper*)").stdout)
    assert names(typed)[:1] == ["soup.txt"] and all(related(typed))


def test_the_python_api_marks_related_hits(indexed: CLI):
    code = ("import json, deskdex, sys\n"
            "r = deskdex.search('cooking dinner', home=sys.argv[1])\n"
            "w = deskdex.search('cooking dinner', words=True, home=sys.argv[1])\n"
            "print(json.dumps([[(h.path.rsplit('/', 1)[-1], h.related) for h in x] for x in (r, w)]))\n")
    p = subprocess.run([sys.executable, "-c", code, str(indexed.home)], capture_output=True, text=True,
                       timeout=120, cwd="/", env=dict(os.environ, PYTHONPATH=""))
    assert p.returncode == 0, p.stderr
    both, words = json.loads(p.stdout)
    assert words == [["dinner.txt", False]]
    assert both[0] == ["dinner.txt", False] and ["soup.txt", True] in both


def _hit(name: str, duplicates: int = 0, rel: bool = False) -> dict:
    return {"uri": f"file:///d/{name}", "path": f"/d/{name}", "title": name, "snippet": "", "highlights": None,
            "score": 1.0, "mime": "text/plain", "mtime": 0, "size": 10, "ext": "txt", "source": "files",
            "cluster": 1 if duplicates else 0, "duplicates": duplicates, "similar": 0, "lang": None, "page": None,
            "related": rel}


def test_the_count_says_the_related_hits_apart():
    assert count_line(3, 0, 3, False, related=2) == "1 result; 2 related by meaning"
    assert count_line(4, 2, 6, False, related=1) == "3 results (+2 copies); 1 related by meaning"
    assert count_line(2, 0, 2, False, related=2) == "no results, 2 related by meaning"
    assert count_line(50, 0, 90, True) == "first 50 results of 90 matching documents"
    assert count_line(50, 0, 90, True, related_total=4) == "first 50 results of 86 matching documents; 4 related by meaning"


def test_every_copy_listed_counts_no_copy_folded():
    # --all lists each copy as a hit of its own: "2 results", not "2 results (+2 copies)".
    results = {"total": 2, "hits": [_hit("a.txt", 1), _hit("b.txt", 1)]}
    assert render_hits(results, color=False).splitlines()[-1] == "2 results (+2 copies)"
    assert render_hits(results, color=False, folded=False).splitlines()[-1] == "2 results"


def test_the_cli_all_says_no_copies_folded(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.txt", "b.txt"):
        (docs / name).write_text("The quarterly zeppelin inventory, identical in both files.\n")
    cli = CLI(tmp_path / "home")
    cli.run("index", str(docs))
    assert cli.run("search", "zeppelin").stdout.splitlines()[-1] == "1 result (+1 copy)"
    assert cli.run("search", "zeppelin", "--all").stdout.splitlines()[-1] == "2 results"



def test_a_name_of_letters_and_digits_asks_for_itself(indexed: CLI):
    # "number20050", "x86_64": the texts nearest its pieces are not related to it.
    for query in ("brake2025", "x86_64", "cve-2023-1234"):
        assert indexed.json("search", query)["hits"] == [], query
    assert all(related(indexed.json("search", "vehicle", "maintenance")))  # plain words: by meaning too


def test_the_web_page_and_api_show_the_related_apart(tmp_path: Path):
    from .web_fixture import start_web

    docs = write_docs(tmp_path / "docs")
    web = start_web(tmp_path / "home", [docs])
    try:
        web.daemon.eventually("brake", [str(docs / "car.txt")])
        api = web.client.get("/api/search", params={"q": "cooking dinner"}).json()
        assert names(api)[0] == "dinner.txt" and related(api)[0] is False and "soup.txt" in names(api)
        assert api["related"] == related(api).count(True) > 0
        assert "related" not in web.client.get("/api/search", params={"q": "cooking dinner", "words": "1"}).json()
        page = web.client.get("/", params={"q": "cooking dinner"}).text
        assert page.count('class="related-head"') == 1 and 'class="related-badge"' in page
        # The heading stands after the hit holding the words, before the first related one.
        assert page.index("Minutes of the club meeting") < page.index('class="related-head"') < page.index("Tomato soup")
        words = web.client.get("/", params={"q": "cooking dinner", "words": "1"}).text
        assert "related-head" not in words and "soup.txt" not in words and "dinner.txt" in words
        assert 'id="words" checked' in words and 'id="words" checked' not in page
    finally:
        web.close()
