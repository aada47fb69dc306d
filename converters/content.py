"""Main content of a web page: which blocks are the text and which are boilerplate.

Three methods mark ``Block.boilerplate`` on a converted HTML Document; boilerplate blocks are kept
(ranking down-weights them, in the ``boiler`` field), only flagged.

``trafilatura`` (the default, issue 17): trafilatura, a library made for the job, finds the main
text of the parsed page; ``align`` places our blocks in that text, and blocks under ``nav``,
``footer``, ``aside`` or a class naming boilerplate are left out of it (see ``_main_by_library``).
What it drops of an article (headings, lists, code and paragraphs of manuals) is put back from our
own blocks around its text (``_fill_gaps``). Where it finds nothing, fails, or the page is too
large for it, the ``dom`` method decides.

``tokens``: the lecture notes' content-block method. The page is a sequence of tokens, each a tag
or a word; choose ``i <= j`` to maximise the tags before ``i`` and after ``j`` plus the words
between them. That total is ``tags + sum(v[i..j])`` with ``v = +1`` for a word and ``-1`` for a
tag, so the best ``(i, j)`` is a maximum-sum subarray (Kadane, linear time). A block is main
content when most of its words fall inside ``[i, j]``. Two choices of what counts as a token keep
the plateau of the notes' figure on real pages: inline formatting (``<em>``, ``<code>``, ``<span>``)
is not a tag token, being no page structure (converters.html.INLINE), and a word of anchor text
weighs 0, not +1, since navigation and related-story lists are text in links.

``dom`` (the fallback; the default before issue 17): each block is scored from its own text and link density and from DOM hints
(``nav``/``footer``/``aside`` ancestors, class and id names such as ``sidebar`` or ``comment``);
link lists, short fragments and hinted blocks score below zero, paragraphs of running text above.
The main content is the run of blocks with the largest total score (the same maximum-sum
subarray, over blocks instead of tokens), minus link lists inside it. When class and id names
leave no run of text at all, the run is sought again without them (Readability's retry).
"""

from __future__ import annotations

import bisect
import functools
import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Sequence

from .document import Block, Document

if TYPE_CHECKING:
    from lxml.html import HtmlElement

logger = logging.getLogger(__name__)

METHODS = ("trafilatura", "dom", "tokens")
DEFAULT = "trafilatura"
# What marks an HTML text that is all content (an EPUB chapter, a mail body): a page finder would
# judge a short mail or chapter by an article's measure, for three times the DOM method's time.
FOR_WHOLE_TEXTS = "dom"
ID_HINT = -2  # the hint of a block whose boilerplate name comes from an id only (see _main_by_library)
MIN_TEXT = 10.0  # the DOM score a page's best run needs to count as running text
# Pages with more blocks go to the DOM method: trafilatura takes about 1 ms a block (a 2,300-block
# page of the Python manual: 2.5 s) and a file has 60 s; an article has a few hundred.
LIBRARY_MAX_BLOCKS = 5_000
LIBRARY_SECOND_OPINION = 250  # a main text of fewer words is asked again with trafilatura's fallbacks
SECOND_OPINION_DOM = 0.8  # ... when it also has under this share of the DOM method's words
# Filling in what trafilatura dropped (_fill_gaps): a run of left-out blocks with more link words
# than RUN_LINKS is a list of teasers; its reading of a page is damaged when the blocks between its
# first and last block bring over DAMAGED_SHARE of the text, or its text is under SHORT_SHARE of
# the DOM method's run.
RUN_LINKS = 0.2
DAMAGED_SHARE = 0.1
SHORT_SHARE = 0.5
LINK_LIST = 3  # blocks mostly links one after the other in trafilatura's text: a list of links
# The article's element: the innermost one holding this share of the words of the main blocks.
ARTICLE_SHARE = 0.9

# A word is a run of letters/digits; ideographs and kana count one each, since CJK text has no spaces.
WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]|\w+")
# Class and id names that mark boilerplate or content (after Readability's unlikely/likely lists).
BOILER_NAMES = re.compile(
    r"nav|menu|footer|sidebar|side-bar|breadcrumb|comment|share|social|related|promo|advert|"
    r"\bads?\b|banner|cookie|popup|newsletter|subscribe|widget|masthead|toolbar|pagination|"
    r"skip|tags?\b|copyright|disclaimer|login|signup|search", re.I)
# Class names of what sits beside an article's text, inside it: captions and photo credits, ad
# slots, rating, sharing and font-size tools, datelines. trafilatura leaves them out on purpose and
# ``_fill_gaps`` does not put them back (with ``figure`` and ``figcaption``: converters.html.BESIDE).
BESIDE_NAMES = re.compile(r"caption|credit|\bads?\b|\bad-|advert|share|rating|tool|\bdate|byline|video|player|playlist", re.I)
# Class names of a box of the article's text: a note, a tip, a warning (DocBook's div.note, .tip,
# .caution; Sphinx's div.admonition) and DocBook's sidebar (the Debian handbook's tips), a
# ``div.sidebar`` as a blog's column of links is: such a box is kept whole when its blocks score as
# running text (see ``_fill_between``).
TEXT_BOX_NAMES = re.compile(r"\b(?:sidebar|side-bar|admonition|note|tip|hint|warning|caution|important|attention|danger)\b",
                            re.I)
CONTENT_NAMES = re.compile(r"article|\bcontent|\bmain|\bpost|entry|\bbody|\btext|story|document|section",
                           re.I)


def count_words(text: str) -> int:
    return len(WORD.findall(text))


@dataclass(slots=True)
class PageTokens:
    """What the HTML walk records for the methods: the tag/word token sequence (``values``: +1 a
    word, 0 a word of anchor text, -1 a tag; ``owners``: the block a word belongs to, -1 for a tag),
    a DOM hint per block (-1 boilerplate element or class name, ``ID_HINT`` a boilerplate id,
    +1 content name, 0 none), ``named``, the blocks whose hint below 0 comes from a class or
    id name only, ``boxes``, for the blocks in a box ``TEXT_BOX_NAMES`` names, that box (a serial
    number; not under ``nav``, ``footer``, ``aside``), and
    ``beside``, the blocks in a figure or a box ``BESIDE_NAMES`` names. ``paths`` is each block's
    open elements when it starts (serial numbers, outermost first; empty where not recorded)."""

    values: list[int] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)
    hints: dict[int, int] = field(default_factory=dict)
    named: set[int] = field(default_factory=set)
    beside: set[int] = field(default_factory=set)
    boxes: dict[int, int] = field(default_factory=dict)
    paths: list[tuple[int, ...]] = field(default_factory=list)
    named_boxes: set[int] = field(default_factory=set)  # of ``boxes``, those whose own class names boilerplate
    text_boxes: set[int] | None = None  # of ``boxes``, those of the text (``_text_boxes``), once found
    counts: list[int] = field(default_factory=list)  # each block's words, once counted (``_counts``)
    links: list[int] = field(default_factory=list)  # ... and its link words (``_nav_link_words``)

    def tags(self, n: int = 1) -> None:
        self.values.extend([-1] * n)
        self.owners.extend([-1] * n)

    def words(self, n: int, block: int, link: bool = False) -> None:
        # A word of anchor text weighs 0: link lists are text with few tags (``<a>A long
        # headline</a>``) and would pass for the main text, which is not made of links.
        self.values.extend([0 if link else 1] * n)
        self.owners.extend([block] * n)


def max_subarray(values: Sequence[float]) -> tuple[int, int, float]:
    """The maximum-sum contiguous subarray ``values[i..j]`` (inclusive): ``(i, j, sum)``.

    Ties keep the earliest start and the shortest span. With no positive value the result is the
    empty span ``(0, -1, 0)``. Integer values give an integer sum.
    """
    best: float = 0
    best_i, best_j = 0, -1
    run: float = 0
    start = 0
    for n, v in enumerate(values):
        if run <= 0:
            run, start = v, n
        else:
            run += v
        if run > best:
            best, best_i, best_j = run, start, n
    return best_i, best_j, best


def content_span(is_tag: Sequence[bool]) -> tuple[int, int]:
    """The notes' optimisation: ``(i, j)`` maximising tags outside ``[i, j]`` plus words inside."""
    i, j, _ = max_subarray([-1 if t else 1 for t in is_tag])
    return i, j


def mark(doc: Document, page: PageTokens, method: str = DEFAULT, root: HtmlElement | None = None) -> None:
    """Set ``boilerplate`` on every block of ``doc`` by ``method`` (one of ``METHODS``); ``root``
    is the parsed page, which trafilatura reads (it works on a copy)."""
    if not doc.blocks:
        return
    main: set[int] | None = None
    if method == "trafilatura":
        if root is not None and len(doc.blocks) <= LIBRARY_MAX_BLOCKS:
            main = _main_by_library(doc.blocks, root, page)
        if main is None:  # no main text found (or a page too large for it): our own method decides
            method = "dom"
    if main is None:
        if method == "tokens":
            main = _main_by_tokens(page, len(doc.blocks))
        elif method == "dom":
            main = _main_by_dom(doc.blocks, _box_hints(doc.blocks, page), page.named)
        else:
            raise ValueError(f"unknown main-content method {method!r}; expected one of {METHODS}")
    for n, block in enumerate(doc.blocks):
        block.boilerplate = n not in main
    logger.debug("%s: %d of %d blocks are main content (%s)", doc.uri, len(main), len(doc.blocks), method)


def main_text(doc: Document) -> str:
    """The text of the main-content blocks, title first (what ``convert --format main`` prints)."""
    return doc.text(main_only=True)


def _main_by_tokens(page: PageTokens, n_blocks: int) -> set[int]:
    i, j, _ = max_subarray(page.values)
    inside = [0] * n_blocks
    total = [0] * n_blocks
    for n, owner in enumerate(page.owners):
        if 0 <= owner < n_blocks:
            total[owner] += 1
            if i <= n <= j:
                inside[owner] += 1
    return {b for b in range(n_blocks) if total[b] and 2 * inside[b] >= total[b]}


def _link_words(block: Block) -> int:
    return sum(count_words(r.text) for r in block.runs if r.href)


def block_score(block: Block, hint: int) -> float:
    """How much a block looks like running text (> 0) or boilerplate (< 0)."""
    words = count_words(block.text)
    if not words:
        return 0.0
    density = _link_words(block) / words
    if hint < 0:
        return -1.0 - words
    if density > 0.5:
        return -1.0 - words * density
    plain = words * (1 - density)
    if block.kind == "h":
        return 0.5  # a heading goes with the text around it, never decides alone
    text = block.text
    # Sentences make text: a fragment with no sentence punctuation is a menu item or a label, but
    # code has no sentences either.
    fragment = block.kind != "pre" and (words < 5 or not any(c in text for c in ".!?。！？:;"))
    if fragment and hint > 0 and density == 0:
        # Inside a container named as content, an item with no link (a name in a list, a table
        # cell) is not navigation, which is made of links: it costs at most a sentence's 2 and
        # counts at most 1, so a list of them neither breaks the text nor carries a run alone.
        return min(plain - 2, 1.0)
    score = plain - (8 if fragment else 2) - 4 * density * words
    if hint > 0:  # a content name makes text count more and a fragment cost less
        return score * 1.5 if score > 0 else score / 1.5
    return score


def _flanked(scores: list[float], n: int, reach: int = 2) -> bool:
    """True where running text lies within ``reach`` blocks on both sides of block ``n``."""
    before = any(s > 1 for s in scores[max(0, n - reach):n])
    return before and any(s > 1 for s in scores[n + 1:n + 1 + reach])


def _main_by_dom(blocks: list[Block], hints: dict[int, int], named: Collection[int] = ()) -> set[int]:
    main = _dom_run(blocks, hints)
    if main is None and named:
        # Readability's second pass: when class/id names leave no run of text, they were wrong (a
        # section whose id, made from its heading, says "cookies" or "share"); element hints stay.
        main = _dom_run(blocks, {n: h for n, h in hints.items() if n not in named})
    if main is None:
        # No run of text anywhere (an index page, a gallery): all unhinted blocks stay main.
        return {n for n in range(len(blocks)) if hints.get(n, 0) >= 0}
    return main


def _text_boxes(blocks: Sequence[Block], page: PageTokens) -> set[int]:
    """The boxes of the text (``PageTokens.boxes``) that are kept whole: their blocks score as
    running text on the whole, names aside, and they sit among the article's paragraphs (their
    parent element holds a paragraph of its own that scores as text), where a blog's sidebar of
    the same name sits beside the article's element."""
    if page.text_boxes is not None:
        return page.text_boxes
    scores: dict[int, float] = defaultdict(float)
    where: dict[int, tuple[int, int]] = {}  # box: (its depth, its parent)
    for n, box in page.boxes.items():
        scores[box] += block_score(blocks[n], 0)
        path = page.paths[n]
        if box not in where and box in path and path.index(box):
            d = path.index(box)
            where[box] = (d, path[d - 1])
    parents = {parent for box, (_, parent) in where.items() if scores[box] > 0}
    text_in: set[tuple[int, int]] = set()  # (depth, parent) of a paragraph outside any box
    if parents:
        for n, path in enumerate(page.paths):
            if len(path) >= 2 and path[-2] in parents and n not in page.boxes and block_score(blocks[n], 0) > 0:
                text_in.add((len(path) - 1, path[-2]))
    page.text_boxes = {box for box, at in where.items() if scores[box] > 0 and at in text_in}
    return page.text_boxes


def _box_hints(blocks: Sequence[Block], page: PageTokens) -> dict[int, int]:
    """``page.hints`` less the class names of boxes of the text (a DocBook sidebar); a name above
    the box (a section's id) stays."""
    if not page.named_boxes:
        return page.hints
    text = _text_boxes(blocks, page) & page.named_boxes
    return {n: h for n, h in page.hints.items() if n not in page.named or page.boxes.get(n) not in text}


def _dom_run(blocks: list[Block], hints: dict[int, int]) -> set[int] | None:
    """The blocks of the best-scoring run minus the link lists inside it; None below ``MIN_TEXT``."""
    raw = [block_score(b, hints.get(n, 0)) for n, b in enumerate(blocks)]
    # A short label, a signature or a lone link between paragraphs is part of the text (jusText's
    # context rule); a run of links is not, since its own neighbours are links.
    flanked = {n for n, s in enumerate(raw) if s < 0 and hints.get(n, 0) >= 0 and _flanked(raw, n)}
    scores = [0.0 if n in flanked else s for n, s in enumerate(raw)]
    i, j, total = max_subarray(scores)
    if total < MIN_TEXT:
        return None
    main = set()
    for n in range(i, j + 1):
        b = blocks[n]
        words = count_words(b.text)
        if hints.get(n, 0) < 0 or (n not in flanked and words and _link_words(b) / words > 0.5):
            continue  # a link list or a hinted box inside the text
        main.add(n)
    return main


@functools.cache
def _extractor(fast: bool) -> Any:
    """trafilatura's options, made once: built for each page, they cost a fifth of its extraction
    (its config file's values are parsed again every time). The library keeps a shared one intact."""
    from trafilatura.settings import Extractor

    return Extractor(fast=fast, comments=False, tables=True)


def library_text(root: HtmlElement, enough: float = LIBRARY_SECOND_OPINION) -> str:
    """The main text trafilatura finds in a parsed page ("" when it finds none or fails); a text
    of fewer than ``enough`` words is asked again with its fallbacks."""
    try:
        import trafilatura  # on first use: 0.5 s and 15 MB that only HTML conversion needs

        # Comments are left out of the main text as the labelled pages leave them out; they stay
        # searchable as boilerplate. ``fast`` skips its second opinions (readability, jusText):
        # the same F1 on the labelled pages in 60 % of the time. A short text is where they
        # count (a short page's footer kept, its paragraphs lost); on a folder of small pages
        # they are still 15 % of the workers' time (docs/benchmarks.md, "Issue 18: after").
        text = trafilatura.extract(root, options=_extractor(fast=True)) or ""
        if count_words(text) < enough:
            text = trafilatura.extract(root, options=_extractor(fast=False)) or ""
        return text
    except Exception as exc:  # noqa: BLE001
        # Any tree the library trips on (a hostile page, a bug of its own) costs the file nothing:
        # our own method decides instead.
        logger.debug("trafilatura failed (%s): DOM method instead", exc)
        return ""


def _main_by_library(blocks: list[Block], root: HtmlElement, page: PageTokens) -> set[int] | None:
    """The blocks whose text is trafilatura's main text, less those inside a ``nav``, ``footer``
    or ``aside`` (short pages it takes whole) or a box whose class names boilerplate (its comment
    detection misses comment lists such a class names), plus the article's blocks it dropped
    (``_fill_gaps``); None when it returns nothing."""
    dom = _dom_run(blocks, _box_hints(blocks, page)) or set()
    # Its fallbacks are asked only when its fast text is short for the page: our own run is the
    # measure (a manual's short page, which the fast mode reads well, costs one call, not two).
    enough = min(LIBRARY_SECOND_OPINION, SECOND_OPINION_DOM * _words(blocks, dom, page))
    text = library_text(root, enough)
    if not text.strip():
        return None
    main = align(blocks, [w.lower() for w in WORD.findall(text)])
    elements = {n for n in main if page.hints.get(n, 0) < 0 and n not in page.named}
    if main - elements:
        main -= elements
    # An id names no box: Sphinx and others make ids from headings ("sharing-cookies").
    classes = {n for n in main if page.hints.get(n, 0) < 0 and page.hints[n] != ID_HINT}
    # A class over all of the text (an article "post social-share") was wrong: kept.
    if _words(blocks, main - classes, page) >= MIN_TEXT:
        main -= classes
    main -= _link_lists(blocks, main, page)
    return _fill_gaps(blocks, main, page, dom) if main else main


def _link_lists(blocks: Sequence[Block], main: set[int], page: PageTokens) -> set[int]:
    """The blocks of ``main`` in runs of ``LINK_LIST`` or more blocks mostly links, one after the
    other on the page (main or not: trafilatura may drop some items of a list). trafilatura keeps
    a list of links (a manual's list of the pages below, a news page's related stories) that a
    reader skips, as the DOM method does; a linked item or two in the text stays. Only links within
    the site count: a list of links to other sites (a manual's page of talks and books) is what the
    page is about."""
    counts, links = _counts(blocks, page), _links(blocks, page)

    def linked(n: int) -> bool:
        if n < 0 or 2 * links[n] <= counts[n]:  # the words of links by name, counted once a page
            return False
        within = sum(count_words(r.text) for r in blocks[n].runs if r.href and "://" not in r.href
                     and not r.href.startswith("mailto:"))
        return 2 * within > counts[n]

    lists: set[int] = set()
    run: list[int] = []
    for n in [*range(len(blocks)), -1]:
        if linked(n):
            run.append(n)
            continue
        if len(run) >= LINK_LIST:
            lists.update(run)
        run = []
    lists &= main
    return lists if _words(blocks, main - lists, page) >= MIN_TEXT else set()


def _counts(blocks: Sequence[Block], page: PageTokens) -> list[int]:
    """Each block's words, counted once a page (the gap filling asks for them many times)."""
    if len(page.counts) != len(blocks):
        page.counts = [count_words(b.text) for b in blocks]
    return page.counts


def _links(blocks: Sequence[Block], page: PageTokens) -> list[int]:
    if len(page.links) != len(blocks):
        page.links = [_nav_link_words(b) if any(r.href for r in b.runs) else 0 for b in blocks]
    return page.links


def _words(blocks: Sequence[Block], which: Collection[int], page: PageTokens) -> int:
    counts = _counts(blocks, page)
    return sum(counts[n] for n in which)


def _fill_gaps(blocks: Sequence[Block], main: set[int], page: PageTokens, dom: set[int]) -> set[int]:
    """``main`` plus the blocks around it that trafilatura left out but are the article's.

    On manuals it drops headings, list items, table cells and code, and paragraphs after an inline
    element it misreads (a Debian handbook page kept 38 % of its words). The blocks between its
    first and last main block count; and where its reading was damaged (those blocks bring over
    ``DAMAGED_SHARE`` of the text, or its text is under ``SHORT_SHARE`` of the DOM method's run
    ``dom``), so do those of the DOM run around it: what it lost at the start and the end. Then so do
    the blocks of the article's element (``_article``) before and after: its title, the tip boxes
    and sections it stops short of. Left out still: link lists and runs of blocks mostly links (a
    list of teasers), ``nav``/``footer``/``aside`` boxes, figures, images, captions and tools
    (``PageTokens.beside``: what it leaves out of a news page on purpose), class-named boxes that
    are not running text (a DocBook "sidebar" is a box of the text, kept whole with its title), and
    a heading whose text (the next block that is no heading) is not main.
    """
    kept = _fill_between(blocks, main, page, min(main) + 1, max(main))
    total = _words(blocks, kept, page)
    # Its text measured against the DOM run's in prose: a page it reads as its one code block (a
    # handbook page) is damaged however long the code.
    prose = _words(blocks, [n for n in kept if blocks[n].kind != "pre"], page)
    damaged = (_words(blocks, kept - main, page) > DAMAGED_SHARE * total
               or prose < SHORT_SHARE * _words(blocks, [n for n in dom if blocks[n].kind != "pre"], page))
    if damaged and dom & kept:
        kept = _fill_between(blocks, kept, page, min(dom), max(dom) + 1)
    # Around that, only the article's boxes (tips, notes) and headings: the rest of its element may
    # be a gallery, highlights or a teaser that a news page keeps beside its story.
    lo, hi = _article(blocks, kept | dom if damaged else kept, page)
    if lo < min(kept) or hi > max(kept):
        kept = _fill_between(blocks, kept, page, lo, min(kept), boxes_only=True)
        kept = _fill_between(blocks, kept, page, max(kept) + 1, hi + 1, boxes_only=True)
    return kept


def _article(blocks: Sequence[Block], seed: Collection[int], page: PageTokens) -> tuple[int, int]:
    """The first and last block of the article's element: the innermost element holding
    ``ARTICLE_SHARE`` of the words of the blocks ``seed`` (those with no recorded path: ``seed``'s)."""
    counts = _counts(blocks, page)
    seed = [n for n in seed if counts[n] and n < len(page.paths)]
    total = sum(counts[n] for n in seed)
    if not total:
        return min(seed, default=0), max(seed, default=-1)
    # Down from the root, while one element at that depth holds the share of the words.
    path = page.paths[max(seed, key=counts.__getitem__)]
    depth = -1
    for d, element in enumerate(path):
        if sum(counts[n] for n in seed if len(page.paths[n]) > d and page.paths[n][d] == element) < ARTICLE_SHARE * total:
            break
        depth = d
    if depth < 0:
        return min(seed), max(seed)
    element = path[depth]
    inside = [n for n, p in enumerate(page.paths) if len(p) > depth and p[depth] == element]
    return inside[0], inside[-1]


def _fill_between(blocks: Sequence[Block], main: set[int], page: PageTokens, lo: int, hi: int,
                  boxes_only: bool = False) -> set[int]:
    """``main`` plus the blocks of ``range(lo, hi)`` that are text of the article (see ``_fill_gaps``);
    ``boxes_only``: only the blocks of class-named boxes of text, and headings."""
    kept = set(main)
    headings = []
    counts, links = _counts(blocks, page), _links(blocks, page)
    run_links = _run_link_share(main, counts, links)
    # A box of the text (a note, a tip, a DocBook sidebar) whose blocks score as running text on
    # the whole is kept whole: its title ("Note", "TIP ...") and its lines of links with it.
    text_boxes = _text_boxes(blocks, page) if page.boxes else set()
    for n in range(lo, hi):
        block = blocks[n]
        words = counts[n]
        if n in kept or not words or n in page.beside:
            continue
        if page.boxes.get(n) in text_boxes:
            kept.add(n)
            continue
        if links[n] / words > 0.5 or run_links[n] > RUN_LINKS:
            continue
        if page.hints.get(n, 0) < 0:
            # Another class-named block of running text between the article's blocks is kept.
            if not boxes_only and n in page.named and block_score(block, 0) > 0:
                kept.add(n)
            continue
        if block.kind == "h":
            headings.append(n)
        elif not boxes_only:
            kept.add(n)
    for n in headings:
        text = next((k for k in range(n + 1, len(blocks)) if blocks[k].kind != "h" and blocks[k].text.strip()), None)
        if text in kept:
            kept.add(n)
    return kept


_URL = re.compile(r"\s*(?:\W\s*)?(?:https?://|ftp://|www\.)\S+\s*$")


def _nav_link_words(block: Block) -> int:
    """Link words that lead somewhere by name: a link whose text is its own address ("→
    https://lumicall.org", as manuals print a reference) is text to read, not navigation."""
    return sum(count_words(r.text) for r in block.runs if r.href and not _URL.match(r.text))


def _run_link_share(main: set[int], counts: Sequence[int], links: Sequence[int]) -> dict[int, float]:
    """For each block outside ``main``, the share of link words in its run of such blocks."""
    share: dict[int, float] = {}
    run: list[int] = []
    for n in range(len(counts) + 1):
        if n < len(counts) and n not in main:
            run.append(n)
            continue
        words = sum(counts[k] for k in run)
        linked = sum(links[k] for k in run)
        share.update((k, linked / words if words else 0.0) for k in run)
        run = []
    return share


def align(blocks: Sequence[Block], main_words: Sequence[str]) -> set[int]:
    """The blocks whose words are ``main_words``, a text extracted from the same page that may
    drop words inside a block but keeps the page's order.

    A block of 3 or more words is placed where most of its word 3-grams fall in ``main_words``
    (a span), and counts when half of them do; then the heaviest chain of placed blocks whose
    spans go forward in page order is main. Text a page repeats (a lede above the article, the
    title in a list of stories) is so taken once, at the copy that fits the chain (on a tie the
    later one, nearer the text after it). A shorter block (a heading, a label) is main when its
    words lie between the spans of the main blocks before and after it: "Home" or "Share" occur
    in articles too, but not at that place.
    """
    words = [[w.lower() for w in WORD.findall(b.text)] for b in blocks]
    # Places in the text of every 3-gram, and of the 1- and 2-grams that are a short block's
    # whole text (only those are looked up: indexing every one was a third of the alignment).
    short = {tuple(ws) for ws in words if 0 < len(ws) < 3}
    index: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for k in range(len(main_words) - 2):
        index[tuple(main_words[k:k + 3])].append(k)
    if short:
        firsts = {gram[0] for gram in short}
        for k, w in enumerate(main_words):
            if w in firsts:
                if (w,) in short:
                    index[(w,)].append(k)
                if k + 1 < len(main_words) and (w, main_words[k + 1]) in short:
                    index[(w, main_words[k + 1])].append(k)
    spans: list[tuple[int, int, int, int]] = []  # (block, start, end, weight) of placed blocks
    for b, ws in enumerate(words):
        if len(ws) >= 3:
            spans.extend((b, *place) for place in _place(ws, index))
    chain = _chain(spans, len(main_words))
    main = {b for b, _, _ in chain}
    starts = [s for _, s, _ in chain]
    for b, ws in enumerate(words):
        if not ws or len(ws) >= 3:
            continue
        k = bisect.bisect(chain, (b,))  # the chain's blocks before and after b
        lo = chain[k - 1][2] - 1 if k else 0
        hi = starts[k] + 1 if k < len(chain) else len(main_words)
        at = index.get(tuple(ws), [])
        if at and bisect.bisect_left(at, lo) < len(at) and at[bisect.bisect_left(at, lo)] <= hi:
            main.add(b)
    return main


_MAX_PLACES = 64  # occurrences of one 3-gram looked at: a phrase repeated more is no anchor


def _place(ws: list[str], index: dict[tuple[str, ...], list[int]]) -> list[tuple[int, int, int]]:
    """Where block words ``ws`` may lie in the main text: ``(start, end, grams found)`` at each of
    the best-voted starts (several where the text repeats the block), best first."""
    # Each 3-gram's places in the text, ascending (the index is built in text order).
    grams = [index.get(tuple(ws[k:k + 3]), [])[:_MAX_PLACES] for k in range(len(ws) - 2)]
    votes: Counter[int] = Counter()
    for k, at in enumerate(grams):
        for p in at:
            votes[p - k] += 1
    places: list[tuple[int, int, int]] = []
    slack = max(3, len(ws) // 10)
    for start, v in votes.most_common(_MAX_PLACES):
        if 2 * v < len(grams) and places:
            break
        # Words the extractor dropped inside the block shift the later 3-grams: count those near
        # (a binary search each: this count was a third of the time of a page's conversion).
        lo, hi = start - slack, start + len(ws) + slack
        found = 0
        for at in grams:
            i = bisect.bisect_left(at, lo)
            found += i < len(at) and at[i] <= hi
        if 2 * found >= len(grams):
            places.append((max(start, 0), start + len(ws), found))
    return places


def _chain(spans: list[tuple[int, int, int, int]], size: int) -> list[tuple[int, int, int]]:
    """The heaviest subsequence of ``spans`` (block, start, end, weight; in block order, a block
    possibly several times) taking a block once, whose spans go forward in the text (overlapping
    by 2 words at most): ``(block, start, end)``. A Fenwick tree of the best chain weight ending
    at each text position makes it O(n log size)."""
    tree = [(0, -1)] * (size + 3)  # (weight, index into spans) of the best chain ending at or before

    def best(pos: int) -> tuple[int, int]:
        pos = min(pos, size + 2)
        got = (0, -1)
        while pos > 0:
            got = max(got, tree[pos])
            pos -= pos & -pos
        return got

    def put(pos: int, value: tuple[int, int]) -> None:
        pos = min(pos, size + 2)
        while pos < len(tree):
            tree[pos] = max(tree[pos], value)
            pos += pos & -pos

    back: list[int] = []
    pending: list[tuple[int, tuple[int, int]]] = []
    for n, (block, start, end, weight) in enumerate(spans):
        if pending and spans[n - 1][0] != block:  # a block's places never chain to each other
            for pos, value in pending:
                put(pos, value)
            pending = []
        w, prev = best(start + 2 + 1)  # positions are 1-based in the tree
        back.append(prev)
        pending.append((end + 1, (w + weight, n)))  # a later span wins a tie: (w, n) compares n last
    for pos, value in pending:
        put(pos, value)
    w, n = best(size + 2)
    chain = []
    while n >= 0:
        chain.append(spans[n][:3])
        n = back[n]
    return chain[::-1]
