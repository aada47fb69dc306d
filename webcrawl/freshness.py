"""Freshness and age under a Poisson change model, as the lecture notes define them.

A page changes as a Poisson process with rate λ (changes per day). Its expected age ``t`` days
after a visit is ``t - (1 - e^(-λt)) / λ``. Revisits observe only whether the page changed since the
previous visit, so λ is estimated by maximum likelihood from intervals with and without a change
(Cho and Garcia-Molina, "Estimating frequency of change", 2003): an interval of length I shows a
change with probability ``1 - e^(-λI)``. Visits that saw no change count as much as those that did.

Revisit intervals minimise the collection's time-averaged expected age for a fetch budget of
``budget`` visits per day (Lagrange: equal marginal age reduction per visit across pages).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from .sink import KnownPage
from .sitemaps import CHANGEFREQ_DAYS

DAY = 86400.0
MIN_RATE = 1e-4  # changes per day: a page never seen to change still gets an occasional visit
MAX_RATE = 100.0


def expected_age(rate: float, t: float) -> float:
    """Expected age (days) of the stored copy ``t`` days after a visit."""
    if rate <= 0:
        return 0.0
    return t - (1 - math.exp(-rate * t)) / rate


def mean_age(rate: float, interval: float) -> float:
    """Time-averaged expected age when the page is revisited every ``interval`` days."""
    x = rate * interval
    if x < 1e-6:
        return rate * interval * interval / 6
    return interval / 2 - 1 / rate + (1 - math.exp(-x)) / (rate * x)


def estimate_rate(intervals: Sequence[float], changed: Sequence[bool]) -> float:
    """MLE of λ from visit intervals (days) and whether each saw a change, with a half-count prior.

    The score function ``Σ_changed I e^(-λI)/(1-e^(-λI)) - Σ_unchanged I`` falls in λ, so bisection
    finds the root. Half an unchanged and half a changed interval of mean length (Cho's +0.5) keep
    the estimate finite when every visit saw a change, and above zero when none did.
    """
    if not intervals:
        return 0.0
    mean = sum(intervals) / len(intervals)
    obs = list(zip(intervals, changed)) + [(mean, True), (mean, False)]
    weights = [1.0] * len(intervals) + [0.5, 0.5]

    def score(rate: float) -> float:
        s = 0.0
        for (i, c), w in zip(obs, weights):
            if c:
                x = rate * i
                s += w * (0.0 if x > 700 else i / math.expm1(x) if x > 1e-12 else 1 / rate)
            else:
                s -= w * i
        return s

    lo, hi = MIN_RATE, MAX_RATE
    if score(hi) > 0:
        return hi
    if score(lo) < 0:
        return lo
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if score(mid) > 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def page_rate(page: KnownPage) -> float:
    """λ for a known page in changes per day: measured from its visits, else its sitemap changefreq."""
    visits = page.visits
    if len(visits) >= 2:
        intervals = [(b.at - a.at) / DAY for a, b in zip(visits, visits[1:])]
        keep = [(i, v.changed) for i, v in zip(intervals, visits[1:]) if i > 0]
        if keep:
            return estimate_rate([i for i, _ in keep], [c for _, c in keep])
    if page.hint_changefreq in CHANGEFREQ_DAYS:
        return 1 / CHANGEFREQ_DAYS[page.hint_changefreq]
    return 1 / 7  # the notes' example: one change a week


def optimal_intervals(rates: Sequence[float], budget: float) -> list[float]:
    """Revisit interval (days) per page minimising Σ mean_age within ``budget`` visits per day.

    With x = λI, d(mean_age)/d(frequency) = g(x)/λ², g(x) = 1 - e^(-x)(1 + x) - x²/2, which falls
    monotonically from 0. Lagrange: g(x_i) = -μλ_i² for every page, μ set so Σ 1/I_i = budget.
    Fast-changing pages get short but bounded intervals; pages that rarely change, long ones.
    """
    if not rates:
        return []
    rates = [max(MIN_RATE, r) for r in rates]

    def intervals(mu: float) -> list[float]:
        return [_solve_g(-mu * r * r) / r for r in rates]

    lo, hi = 1e-12, 1e12
    for _ in range(60):
        mu = math.sqrt(lo * hi)
        if sum(1 / i for i in intervals(mu)) > budget:
            lo = mu  # too many visits: a larger multiplier lengthens every interval
        else:
            hi = mu
    return intervals(hi)


def _g(x: float) -> float:
    return -math.expm1(-x) - x * math.exp(-x) - x * x / 2


def _solve_g(target: float) -> float:
    lo, hi = 1e-9, 1e9
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if _g(mid) > target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def due(pages: Iterable[KnownPage], budget: float, now: float) -> list[KnownPage]:
    """Pages whose optimal revisit time has come, most overdue (in expected age) first."""
    pages = list(pages)
    intervals = optimal_intervals([page_rate(p) for p in pages], budget)
    ready = [(p, expected_age(page_rate(p), (now - p.fetched_at) / DAY)) for p, i in zip(pages, intervals)
             if now - p.fetched_at >= i * DAY]
    ready.sort(key=lambda pa: -pa[1])
    return [p for p, _ in ready]


def collection_freshness(pages: Iterable[KnownPage], now: float) -> tuple[float, float]:
    """(expected freshness, expected average age in days) of the stored copies right now."""
    fresh = age = 0.0
    n = 0
    for p in pages:
        rate, t = page_rate(p), max(0.0, (now - p.fetched_at) / DAY)
        fresh += math.exp(-rate * t)
        age += expected_age(rate, t)
        n += 1
    return (fresh / n, age / n) if n else (1.0, 0.0)
