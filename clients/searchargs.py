"""The options of ``deskdex search``, defined once: the full command line (deskdex.clients.cli) builds
its argparse parser from ``OPTIONS``, and the fast path (deskdex.clients.launch) reads the same
table with ``parse_fast``, which takes only command lines it reads exactly as argparse does and
leaves every other one (``--help``, an abbreviation, a bad value, an unknown option) to argparse,
so that every message and error comes from one place.

Light on purpose: no argparse, no typing at run time.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COMMON_FLAGS = ("-v", "--verbose")  # options every command takes: flags ...
COMMON_VALUES = ("--home",)  # ... and options with a value


class Option:
    """``--name`` of ``deskdex search``: ``kind`` is "flag", "int" (``minimum`` and up), "str" or "choice";
    ``short``, another name for it (``-0``)."""

    __slots__ = ("flag", "dest", "kind", "default", "help", "minimum", "choices", "group", "metavar", "short")

    def __init__(self, flag: str, kind: str, default: Any, help: str, *, minimum: int | None = None,
                 choices: tuple[str, ...] = (), group: str = "", metavar: str | None = None,
                 short: str | None = None) -> None:
        self.flag, self.kind, self.default, self.help = flag, kind, default, help
        self.dest = flag.lstrip("-").replace("-", "_")
        self.minimum, self.choices, self.group, self.metavar = minimum, choices, group, metavar
        self.short = short

    @property
    def names(self) -> tuple[str, ...]:
        return (self.short, self.flag) if self.short else (self.flag,)

    def convert(self, text: str) -> Any:
        """The value of ``text``; ValueError when argparse would refuse it."""
        if self.kind == "str":
            return text
        if self.kind == "int":
            if not text.strip().lstrip("+-").isdigit():
                raise ValueError(text)
            value = int(text)
            if self.minimum is not None and value < self.minimum:
                raise ValueError(f"must be {self.minimum} or more, not {text}")
            return value
        if text not in self.choices:
            raise ValueError(text)
        return text


OPTIONS: tuple[Option, ...] = (
    Option("--limit", "int", 10, "results to show (default 10)", minimum=1),
    Option("--offset", "int", 0, "skip this many results first", minimum=0),
    Option("--sort", "choice", "relevance", "order by relevance (default), date (newest first) or size "
           "(largest first)", choices=("relevance", "date", "size")),
    Option("--all", "flag", False, "show every copy too (default: the best-matching of each group of copies)"),
    Option("--similar", "str", None, "list every document of the cluster of this hit's URI (its copies and "
           "similar documents), ranked by the words, which may then be left out", metavar="URI"),
    Option("--words", "flag", False, "by the words alone: not by meaning too (with the setting meaning on)"),
    Option("--json", "flag", False, "print {total, hits: [...]} as JSON", group="output"),
    Option("--paths", "flag", False, "print the paths of the files found, one a line: exact for another program, "
           "made safe to read on a terminal", group="output"),
    Option("--null", "flag", False, "with --paths: end each path with a NUL byte instead, for xargs -0 (as "
           "find -print0 does); safe for any name, even one with a newline", short="-0"),
    Option("--open", "int", None, "open the Nth result with the default application", minimum=1,
           group="output", metavar="N"),
)
BY_FLAG = {name: o for o in OPTIONS for name in o.names}


def parse_fast(argv: list[str]) -> dict[str, Any] | None:
    """``deskdex [--home H] search WORDS [OPTIONS]`` as {"home", "query", option dests...}, or None
    for anything argparse might read otherwise (the full command line then runs)."""
    out: dict[str, Any] = {o.dest: o.default for o in OPTIONS}
    out["home"] = None
    words: list[str] = []
    seen_command = seen_words_end = False
    groups: set[str] = set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if words and arg.startswith("-"):
            seen_words_end = True  # argparse takes one run of words: any option ends it
        if arg in COMMON_FLAGS:
            continue
        name, eq, value = arg.partition("=")
        if name in COMMON_VALUES:
            if not eq:
                if i >= len(argv) or argv[i].startswith("-"):
                    return None
                value, i = argv[i], i + 1
            out["home"] = value
            continue
        if not seen_command:
            if arg != "search":
                return None
            seen_command = True
            continue
        if arg == "--":  # the words follow, even those starting with -: how a query is passed safely
            rest = argv[i:]
            if words or not rest or "--" in rest:
                return None
            words = rest
            break
        if arg.startswith("-"):
            option = BY_FLAG.get(name)
            if option is None or (option.kind == "flag" and eq):
                return None  # --help, -x, an abbreviation, --, a negative word: argparse decides
            if option.group:
                if option.group in groups:
                    return None
                groups.add(option.group)
            if option.kind == "flag":
                out[option.dest] = True
                continue
            if not eq:
                if i >= len(argv) or argv[i].startswith("-"):
                    return None
                value, i = argv[i], i + 1
            try:
                out[option.dest] = option.convert(value)
            except ValueError:
                return None
            continue
        if seen_words_end:
            return None  # words on both sides of an option: argparse takes only the first run
        words.append(arg)
    if not words:
        return None
    out["query"] = words
    return out
