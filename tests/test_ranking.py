"""Ranking (issue 17): a title match weighs less than many body matches of every query word."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from deskdex.index import Collection, search

from .conftest import text_collection

NOW = time.time()
# Words that occur now and then in bodies (so their body statistics are ordinary) and never in a
# title but one: as in a real collection, a word is far rarer among titles than among bodies.
FILLER_TOPICS = ["kernel", "latency", "scheduler", "memory", "network", "storage", "printer", "backup"]


def _docs() -> list[tuple[str, str, str]]:
    docs = []
    for i in range(60):
        a, b = FILLER_TOPICS[i % 8], FILLER_TOPICS[(i * 3 + 1) % 8]
        docs.append((f"/home/u/misc/note{i}.txt", f"Meeting {i} minutes",
                     f"We talked about the {a} and then about {b} for a while, item {i}. "
                     "Nothing was decided and the next meeting is next week."))
    docs += [
        # Every query word several times in the body, a title without any of them.
        ("/home/u/perf/tuning.txt", "Performance notes",
         "The kernel scheduler decides latency. Scheduler latency grows when the kernel is busy; "
         "we measured kernel latency under the new scheduler and the scheduler kept latency low. "
         "Kernel scheduler latency was 2 ms."),
        # One query word in the title, the others once in a long body about something else.
        ("/home/u/misc/scheduler.txt", "Scheduler",
         "A shift scheduler for the office: who opens the shop on Mondays, who closes it on Fridays, "
         "how holidays are swapped and which weeks the bakery delivers early. The kernel of the plan is "
         "fairness. Replies come with some latency. " + "Shifts are planned a month ahead. " * 8),
    ]
    return docs


@pytest.fixture(scope="module")
def coll(tmp_path_factory: pytest.TempPathFactory):
    c = text_collection(tmp_path_factory.mktemp("ranking"), _docs(), NOW)
    yield c
    c.close()


def ranked(coll: Collection, q: str) -> list[str]:
    return [Path(h["path"]).name for h in search(coll, q, limit=10, snippets=False)["hits"]]


def test_many_body_matches_of_every_word_beat_one_word_in_a_title(coll: Collection) -> None:
    hits = ranked(coll, "kernel scheduler latency")
    assert hits[:2] == ["tuning.txt", "scheduler.txt"], hits


def test_a_title_holding_every_query_word_still_ranks_first(coll: Collection) -> None:
    # The fix must not flatten titles: "performance notes" is the title of one document only,
    # while both words occur in bodies elsewhere.
    hits = ranked(coll, "scheduler")
    assert hits[0] == "scheduler.txt", hits
    assert ranked(coll, "performance notes")[0] == "tuning.txt"
