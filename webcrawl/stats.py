"""Per-site crawl counters, kept across runs in a small JSON state file, and the status report."""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from .freshness import collection_freshness
from .sink import KnownPage
from .urls import site_of

logger = logging.getLogger(__name__)

STATE_FILE = "crawl-state.json"  # in the data folder: the counters of every crawl, added up


@dataclass
class SiteStats:
    fetched: int = 0  # requests that got a response we could use (2xx or 304)
    stored: int = 0
    unchanged: int = 0  # revisits that found no change (304, or the same text)
    duplicates: int = 0
    robots_excluded: int = 0
    off_topic: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # reason -> count
    retried: int = 0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["failed"] = dict(self.failed)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "SiteStats":
        s = cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "failed"})
        s.failed = Counter(d.get("failed", {}))
        return s

    def add(self, other: "SiteStats") -> None:
        for k in ("fetched", "stored", "unchanged", "duplicates", "robots_excluded", "off_topic", "retried"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.failed.update(other.failed)


@dataclass
class CrawlStats:
    sites: dict[str, SiteStats] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)  # url -> outcome of its last request
    feeds: dict[str, float] = field(default_factory=dict)  # feed url -> Unix time of its next poll
    started: float = field(default_factory=time.time)
    # A shard of a crawl (--shard I/N --broker) that ended without others gone while they had work:
    # those shards, with the links handed to each that wait for it.
    shards_left: dict[int, int] = field(default_factory=dict)

    def site(self, url: str) -> SiteStats:
        return self.sites.setdefault(site_of(url), SiteStats())

    def record(self, url: str, outcome: str) -> None:
        self.outcomes[url] = outcome

    def fail(self, url: str, reason: str) -> None:
        self.site(url).failed[reason] += 1
        self.outcomes[url] = reason

    def totals(self) -> SiteStats:
        total = SiteStats()
        for s in self.sites.values():
            total.add(s)
        return total


def load_state(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            state: dict[str, Any] = json.load(f)  # what save_state wrote
            return state
    except FileNotFoundError:
        return {"sites": {}, "feeds": {}}
    except (OSError, ValueError) as exc:
        logger.warning("%s unreadable (%s); starting a fresh crawl state", path, exc)
        return {"sites": {}, "feeds": {}}


def save_state(path: str, run: CrawlStats) -> None:
    """Add this run's counters to the cumulative ones in ``path`` (written atomically)."""
    state = load_state(path)
    for name, s in run.sites.items():
        merged = SiteStats.from_json(state["sites"].get(name, {}))
        merged.add(s)
        state["sites"][name] = merged.to_json()
    state["feeds"].update(run.feeds)
    state["last_run"] = {"started": run.started, "ended": time.time(), **run.totals().to_json()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def status(state: dict[str, Any], pages: Iterable[KnownPage], now: float | None = None) -> dict[str, Any]:
    """Per site: pages known, counters, failures by reason, freshness and average age (days)."""
    now = now or time.time()
    by_site: dict[str, list[KnownPage]] = {}
    for p in pages:
        by_site.setdefault(site_of(p.url), []).append(p)
    report: dict[str, Any] = {}
    for name in sorted(set(by_site) | set(state.get("sites", {}))):
        known = by_site.get(name, [])
        fresh, age = collection_freshness(known, now)
        report[name] = {"known": len(known), **state.get("sites", {}).get(name, SiteStats().to_json()),
                        "freshness": round(fresh, 4), "average_age_days": round(age, 4)}
    all_pages = [p for ps in by_site.values() for p in ps]
    fresh, age = collection_freshness(all_pages, now)
    return {"sites": report, "collection": {"known": len(all_pages), "freshness": round(fresh, 4),
                                            "average_age_days": round(age, 4)}}
