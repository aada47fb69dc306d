"""Manual pages: man(7) and mdoc(7) roff read as text macros, no helper program needed.

``.TH NAME SECTION`` (mdoc: ``.Dt``) and the NAME section give the title (``ls(1)``) and the
one-line description (meta ``description``); each ``.SH``/``.Sh`` is a heading of level 1 and each
``.SS``/``.Ss`` of level 2; ``.B``/``.I`` and ``\\fB``/``\\fI`` fonts are strong and emphasis;
``.nf``/``.fi`` and ``.EX``/``.EE`` (mdoc: ``.Bd -literal``) are preformatted; ``.TP``, ``.IP`` and
``.It`` are list items. Requests that only lay out the page (indents, spacing, registers, macro
definitions, conditionals) and comments are dropped; escapes become the characters they stand for.
Detection (``detect.py``) only takes a file with a manual section suffix for a man page when its
first line is roff, so a ``notes.1`` of plain text stays plain text.
"""

from __future__ import annotations

import re
from typing import Iterator

from .detect import looks_like_roff, looks_like_text
from .document import Block, Document, Inline, clean
from deskdex.errors import CorruptFile
from .source import Source
from .textcodec import decode

# Special characters, \(xx and \[name]: the common ones; an unknown one is dropped.
_CHARS = {
    "em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-", "pl": "+", "mu": "\u00d7", "di": "\u00f7",
    "bu": "\u2022", "co": "\u00a9", "rg": "\u00ae", "tm": "\u2122", "de": "\u00b0", "dg": "\u2020",
    "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "aq": "'", "dq": '"', "ga": "`",
    "aa": "\u00b4", "ha": "^", "ti": "~", "rs": "\\", "sl": "/", "ba": "|", "br": "|", "or": "|",
    "ul": "_", "ru": "_", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "la": "\u27e8", "ra": "\u27e9",
    "<-": "\u2190", "->": "\u2192", "ua": "\u2191", "da": "\u2193", "<=": "\u2264", ">=": "\u2265",
    "!=": "\u2260", "==": "\u2261", "~=": "\u2245", "+-": "\u00b1", "12": "\u00bd", "14": "\u00bc",
    "34": "\u00be", "sc": "\u00a7", "ps": "\u00b6", "ct": "\u00a2", "Po": "\u00a3", "Eu": "\u20ac",
    "eu": "\u20ac", "Ye": "\u00a5", "fm": "\u2032", "sd": "\u2033", "at": "@", "sh": "#", "Do": "$",
    "es": "\u2205", "if": "\u221e", "no": "\u00ac", "AN": "\u2227", "OR": "\u2228", "sq": "\u25a1",
    ":a": "\u00e4", ":o": "\u00f6", ":u": "\u00fc", ":A": "\u00c4", ":O": "\u00d6", ":U": "\u00dc",
    "ss": "\u00df", "'e": "\u00e9", "`e": "\u00e8", "'a": "\u00e1", "`a": "\u00e0", ",c": "\u00e7",
    "~n": "\u00f1", "Fo": "\u00ab", "Fc": "\u00bb", "fo": "\u2039", "fc": "\u203a", "lh": "\u261c",
    "rh": "\u261e", "hA": "\u21d4", "rA": "\u21d2", "lA": "\u21d0", "*a": "\u03b1", "*b": "\u03b2",
    "*l": "\u03bb", "*m": "\u03bc", "*p": "\u03c0", "ff": "ff", "fi": "fi", "fl": "fl", "Fi": "ffi",
}
# Strings, \*x, \*(xx and \*[name], when the page does not define them itself (pod2man's among them).
_STRINGS = {"lq": "\u201c", "rq": "\u201d", "R": "\u00ae", "Tm": "\u2122", "C+": "C++", 'L"': '"', 'R"': '"',
            "C`": '"', "C'": '"', "Aq": "'", "PI": "\u03c0", "--": "--"}
_FONTS = {"B": "strong", "I": "em", "R": "", "P": "", "BI": "strong", "CB": "strong", "CW": "code", "C": "code",
          "CR": "code", "CI": "em", "TT": "code", "1": "", "2": "em", "3": "strong", "4": "strong"}
# Escapes with a delimited argument (\h'1n', \w'text') or one name argument (\kx, \gx): dropped.
_DELIMITED = set("hvwoblLDXxRSHZANC")
_NAMED = set("kgmMFVOYn")
_ALTERNATING = {"BR": ("strong", ""), "RB": ("", "strong"), "BI": ("strong", "em"), "IB": ("em", "strong"),
                "IR": ("em", ""), "RI": ("", "em")}
_MDOC_STYLE = {"Nm": "strong", "Fl": "strong", "Cm": "strong", "Ic": "strong", "Sy": "strong", "Fn": "strong",
               "Ar": "em", "Em": "em", "Pa": "em", "Va": "em", "Fa": "em", "Ft": "em", "Ev": "code", "Dv": "code",
               "Er": "code", "Li": "code", "Ql": "code", "Cd": "code", "Ad": "em", "Ms": "code", "Mt": "em"}
_MDOC_WORDS = {"Bx": "BSD", "Bsx": "BSD/OS", "Fx": "FreeBSD", "Nx": "NetBSD", "Ox": "OpenBSD", "Dx": "DragonFly",
               "Ux": "UNIX", "At": "AT&T UNIX", "St": "", "Lb": "", "Dq": "", "Qq": "", "Sq": "", "Pq": "",
               "Op": "", "Ns": "", "Pf": "", "No": "", "Xo": "", "Xc": "", "Ta": "", "Do": "", "Dc": "",
               "Qo": "", "Qc": "", "So": "", "Sc": "", "Po": "(", "Pc": ")", "Bro": "{", "Brc": "}", "Oo": "[",
               "Oc": "]", "Eo": "", "Ec": "", "Ao": "<", "Ac": ">", "Aq": "", "Bq": "", "Brq": "", "Eq": "",
               "Sx": "", "Xr": "", "Tn": "", "Lk": ""}
_ENCLOSE = {"Op": ("[", "]"), "Pq": ("(", ")"), "Dq": ("\u201c", "\u201d"), "Qq": ('"', '"'), "Sq": ("\u2018", "\u2019"),
            "Aq": ("<", ">"), "Bq": ("[", "]"), "Brq": ("{", "}")}
_IGNORED_MDOC = {"Dd", "Os", "Bk", "Ek", "Bf", "Ef", "Db", "Rs", "Re", "Sm", "Tg", "Ud", "Bt", "In"}
_SKIP_BLOCKS = ("de", "de1", "am", "ami", "ig", "am1", "dei")
_TEXT_MACROS = {"B": "strong", "I": "em", "SB": "strong", "SM": "", "R": "", "CW": "code"}
_ROFF_START = re.compile(r"^(?:\.|')")
_TBL_FORMAT = re.compile(r"[lrcnasLRCNAS^_=|tTbBiIfFwWeEuUvVpPzZxXdD0-9()., \t-]*")
_EXPANSION = 100_000  # characters strings may add to one line
_TOKEN = re.compile(r'"((?:[^"]|"")*)"?|(\S+)')


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if not looks_like_text(data[:8192]) or not looks_like_roff(data[:8192]):
        raise CorruptFile("not a manual page: no roff at its start")
    text, encoding = decode(data)
    page = _Page(Document(uri=source.uri, mime=mime, meta={"encoding": encoding}))
    page.read(text.replace("\r\n", "\n").replace("\r", "\n"))
    return page.finish(_base_name(source.name))


def _base_name(name: str) -> str:
    return re.sub(r"\.(\d\w*|n|l|man)$", "", name)


def _args(line: str) -> list[str]:
    """Macro arguments: words, or quoted strings where "" is a quote."""
    return [q.replace('""', '"') if q is not None and w is None else w or ""
            for q, w in ((m.group(1), m.group(2)) for m in _TOKEN.finditer(line))]


class _Page:
    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.runs: list[Inline] = []
        self.kind = "p"
        self.level = 0
        self.font = ""
        self.fill = True
        self.strings = dict(_STRINGS)
        self.name = ""
        self.section = ""
        self.mdoc_name = ""
        self.in_name = False
        self.name_text: list[str] = []
        self.description = ""
        self.pending_tag = 0  # .TP: the next text line is the tag, a block of its own
        self.href: str | None = None
        self.link_start = 0
        self.heading_next: int = 0  # .SH with no argument: the next line is the heading

    # --- lines ------------------------------------------------------------------------------

    def read(self, text: str) -> None:
        lines = iter(_joined(text))
        for line in lines:
            if not _ROFF_START.match(line):
                if self.heading_next:
                    self.heading(self.heading_next, [line])
                elif not self.fill:
                    self.add(self.inline(line))
                    self.runs.append(Inline("\n"))
                elif line.strip():
                    self.text_line(self.inline(line))
                else:
                    self.flush()  # a blank line is a paragraph break
                continue
            body = line[1:].lstrip(" \t")
            if body.startswith('\\"') or not body or body.startswith("\\}"):
                continue
            name, _, rest = body.partition(" ")
            name, rest = name.split("\t", 1)[0], rest.strip()
            if name in _SKIP_BLOCKS:
                _skip_block(lines, rest)
            elif name == "TS":
                self.table(lines)
            elif name in ("if", "ie", "el", "while"):
                _skip_conditional(lines, body)
            else:
                self.macro(name, rest)

    def table(self, lines: Iterator[str]) -> None:
        """A tbl(1) table, ``.TS`` to ``.TE``: its layout lines dropped, each cell a table cell."""
        self.flush()
        layout = first = True
        tab = "\t"
        for line in lines:
            if line.startswith((".TE", "'TE")):
                return
            if layout and first and line.rstrip().endswith(";"):  # the options line
                m = re.search(r"tab\s*\((.)\)", line)
                tab = m.group(1) if m else tab
                first = False
                continue
            first = False
            if layout and _TBL_FORMAT.fullmatch(line):
                layout = not line.rstrip().endswith(".")
                continue
            layout = False
            if _ROFF_START.match(line) or line.strip() in ("_", "=", "T}", "T{"):
                continue
            for cell in line.split(tab):
                text = re.sub(r"\s+", " ", self.inline_text(cell.replace("T{", "").replace("T}", ""))).strip()
                if text and text not in ("_", "="):
                    self.doc.add("td", text)

    def text_line(self, runs: list[Inline]) -> None:
        if self.runs and not self.runs[-1].text.endswith((" ", "\n")):
            self.runs.append(Inline(" "))
        self.add(runs)
        if self.pending_tag:
            self.pending_tag = 0
            self.flush()
            self.kind, self.level = "p", 0

    def add(self, runs: list[Inline]) -> None:
        for r in runs:
            if self.href is not None:
                r.href = self.href
            self.runs.append(r)

    def flush(self) -> None:
        runs = [r for r in self.runs if r.text]
        self.runs = []
        if self.fill:
            text = re.sub(r"[ \t\n]+", " ", "".join(r.text for r in runs)).strip()
            for r in runs:
                r.text = re.sub(r"[ \t\n]+", " ", r.text)
            if runs:
                runs[0].text = runs[0].text.lstrip()
                runs[-1].text = runs[-1].text.rstrip()
        else:
            text = "".join(r.text for r in runs).strip("\n")
        if not text or text.isspace():
            return
        if self.in_name:
            self.name_text.append(text)
        kind = "pre" if not self.fill else self.kind
        for r in runs:
            r.text = clean(r.text)
        self.doc.blocks.append(Block(kind, [r for r in runs if r.text] if kind != "pre" else [Inline(clean(text))],
                                     level=self.level if kind == "li" else 0))

    def heading(self, level: int, words: list[str]) -> None:
        self.heading_next = 0
        self.flush()
        self.finish_name()
        text = re.sub(r"\s+", " ", "".join(r.text for r in self.inline(" ".join(words)))).strip()
        self.kind, self.level, self.fill = "p", 0, True
        if text:
            self.doc.add("h", text, level=level)
            self.in_name = level == 1 and text.upper() in ("NAME", "NOM", "NAMN", "NOMBRE")

    def finish_name(self) -> None:
        if self.in_name and self.name_text:
            line = " ".join(self.name_text)
            names, desc = line, ""
            m = re.match(r"(.*?)\s+[-\u2013\u2014]+\s+(.*)", line) or re.match(r"(.*?)\s*-\s+(.*)", line)
            if m:
                names, desc = m.group(1), m.group(2)
            self.name = self.name or names.split(",")[0].strip().rstrip(" -\u2013\u2014")
            self.description = self.description or desc.strip()
        self.in_name = False
        self.name_text = []

    def finish(self, fallback: str) -> Document:
        self.flush()
        self.finish_name()
        name = self.name or self.mdoc_name or fallback
        self.doc.title = f"{name}({self.section.lower()})" if self.section else name
        if self.description:
            self.doc.meta["description"] = clean(self.description)
        if self.section:
            self.doc.meta["man_section"] = clean(self.section)
        return self.doc

    # --- macros -----------------------------------------------------------------------------

    def macro(self, name: str, rest: str) -> None:
        args = _args(rest)
        if name == "TH" or name == "Dt":
            if args:
                page = self.inline_text(args[0])
                self.mdoc_name = page.lower() if page.isupper() else page
                self.section = args[1] if len(args) > 1 else ""
        elif name in ("SH", "Sh", "SS", "Ss"):
            level = 1 if name in ("SH", "Sh") else 2
            if args:
                self.heading(level, [" ".join(args)])
            else:
                self.flush()
                self.heading_next = level
        elif name in ("PP", "P", "LP", "HP", "Pp", "Lp", "sp", "ns", "bp"):
            self.flush()
            if name != "sp" and name != "ns":
                self.kind, self.level = "p", 0
        elif name in ("TP", "TQ"):
            self.flush()
            self.kind, self.level, self.pending_tag = "li", 1, 1
        elif name == "IP":
            self.flush()
            self.kind, self.level = "li", 1
            tag = self.inline_text(args[0]) if args else ""
            if tag and tag not in ("\u2022", "-", "*", "o", "\u00b7"):
                self.runs.append(Inline(tag + " "))
        elif name in ("RS", "RE", "in", "ti", "Bl", "El", "YS", "PD", "ad", "na", "ce"):
            if name in ("RS", "RE", "Bl", "El", "YS"):
                self.flush()
        elif name in ("nf", "EX", "Bd"):
            if name != "Bd" or any(a in ("-literal", "-unfilled") for a in args):
                self.flush()
                self.fill = False
            else:
                self.flush()
        elif name in ("fi", "EE", "Ed"):
            self.flush()
            self.fill = True
        elif name == "br":
            self.runs.append(Inline("\n" if not self.fill else " "))
        elif name == "ft":
            self.font = _FONTS.get(args[0] if args else "P", "")
        elif name == "ds" and args:
            value = rest[len(rest.split(None, 1)[0]):].strip() if rest.split() else ""
            self.strings[args[0]] = value[1:] if value.startswith('"') else value
        elif name in _TEXT_MACROS:
            if args:
                self.text_line(self.inline(" ".join(args), _TEXT_MACROS[name]))
        elif name in _ALTERNATING:
            styles = _ALTERNATING[name]
            runs: list[Inline] = []
            for i, a in enumerate(args):
                runs.extend(self.inline(a, styles[i % 2]))
            self.text_line(runs)
        elif name == "SY":
            self.flush()
            self.kind, self.level = "p", 0
            self.text_line(self.inline(" ".join(args), "strong"))
        elif name == "OP" and args:
            self.text_line([Inline("["), *self.inline(args[0], "strong"),
                            *(self.inline(" " + " ".join(args[1:]), "em") if len(args) > 1 else []), Inline("]")])
        elif name == "MR" and args:
            runs = self.inline(args[0], "em") + [Inline(f"({args[1]})" if len(args) > 1 else "")]
            self.text_line(runs + ([Inline(args[2])] if len(args) > 2 else []))
        elif name == "so" and args:  # a page that is another's: say which
            page = args[0].rsplit("/", 1)[-1]
            m = re.fullmatch(r"(.+)\.(\d\w*)(?:\.\w+)?", page)
            self.text_line([Inline(f"{m.group(1)}({m.group(2)})" if m else page)])
        elif name in ("UR", "MT"):
            self.href = ("mailto:" if name == "MT" else "") + (self.inline_text(args[0]) if args else "")
            self.link_start = len(self.runs)
        elif name in ("UE", "ME"):
            href, self.href = self.href, None
            if href and len(self.runs) == self.link_start:
                self.runs.append(Inline(href.removeprefix("mailto:"), href=href))
            if args:
                self.runs.append(Inline(args[0]))
        elif name == "It":
            self.flush()
            self.kind, self.level = "li", 1
            if args:
                self.add(self.mdoc(args))
                self.runs.append(Inline(" "))
        elif name == "Nm" and self.in_name or name == "Nd":
            if name == "Nm" and args and not self.name:
                self.name = self.inline_text(args[0]).rstrip(",")
            if name == "Nd":
                self.description = self.inline_text(" ".join(args))
                self.text_line([Inline("\u2014 " + self.description)])
            else:
                self.text_line(self.mdoc([name, *args]))
        elif name[:1].isupper() and (name in _MDOC_STYLE or name in _MDOC_WORDS or name in _ENCLOSE):
            self.text_line(self.mdoc([name, *args]))
        # Anything else only lays the page out (registers, traps, hyphenation...): dropped.

    def mdoc(self, words: list[str]) -> list[Inline]:
        """An mdoc line of callable macros and words, as text: ``Fl a Ar file`` is ``-a file``."""
        out: list[Inline] = []
        closers: list[str] = []
        style, space, i = "", True, 0
        while i < len(words):
            w = words[i]
            i += 1
            if w in _ENCLOSE:
                opening, closing = _ENCLOSE[w]
                out.append(Inline((" " if out and space else "") + opening))
                closers.append(closing)
                space = False
                continue
            if w == "Xr" and i < len(words):
                page, sec = words[i], words[i + 1] if i + 1 < len(words) else ""
                i += 2
                out.append(Inline((" " if out and space else "") + page, "em"))
                out.append(Inline(f"({sec})" if sec else ""))
                space = True
                continue
            if w == "Fl":
                out.append(Inline((" " if out and space else "") + "-", "strong"))
                style, space = "strong", False
                continue
            if w == "Nm" and (i >= len(words) or words[i] in _MDOC_STYLE):
                out.append(Inline((" " if out and space else "") + (self.name or self.mdoc_name), "strong"))
                space = True
                continue
            if w in ("Ns", "Pf"):
                space = False
                continue
            if w in _MDOC_STYLE:
                style = _MDOC_STYLE[w]
                continue
            if w in _MDOC_WORDS:
                if _MDOC_WORDS[w]:
                    out.append(Inline((" " if out and space else "") + _MDOC_WORDS[w]))
                    space = w not in ("Po", "Bro", "Oo", "Ao")
                continue
            if w in _IGNORED_MDOC:
                continue
            text = self.inline_text(w)
            out.append(Inline((" " if out and space and text not in (",", ".", ";", ":", ")", "]") else "")))
            out.extend(self.inline(text if "\\" not in w else w, style) if text else [])
            space = True
        for closing in reversed(closers):
            out.append(Inline(closing))
        return [r for r in out if r.text]

    # --- escapes ----------------------------------------------------------------------------

    def inline_text(self, text: str) -> str:
        return "".join(r.text for r in self.inline(text))

    def inline(self, text: str, style: str | None = None) -> list[Inline]:
        """Text with its escapes resolved; font changes become runs of their style."""
        runs: list[Inline] = []
        buf: list[str] = []
        font = self.font if style is None else style

        def cut(new: str) -> None:
            nonlocal font
            if buf:
                runs.append(Inline("".join(buf), font))
                buf.clear()
            font = new

        for kind, value in _escapes(text, self.strings, [_EXPANSION]):
            if kind == "font":
                new = _FONTS.get(value, "") if value not in ("P", "R", "") or style is None else style
                cut(new)
                if style is None:
                    self.font = new
            else:
                buf.append(value)
        cut(font)
        return runs


def _escapes(text: str, strings: dict[str, str], budget: list[int], depth: int = 0) -> Iterator[tuple[str, str]]:
    """("text", s) and ("font", name) pieces of a line of roff text; strings are expanded within
    ``budget`` characters a line (a string of strings of strings must not grow without end)."""
    i, n = 0, len(text)
    while i < n:
        j = text.find("\\", i)
        if j < 0:
            yield "text", text[i:]
            return
        if j > i:
            yield "text", text[i:j]
        if j + 1 >= n:
            return
        c = text[j + 1]
        i = j + 2
        if c == "f":
            name, i = _name(text, i)
            yield "font", name
        elif c == "(" or c == "[":
            name, i = _name(text, j + 1)
            if name.startswith(("u", "U")) and re.fullmatch(r"[uU][0-9A-Fa-f]{4,6}(_[0-9A-Fa-f]{4,6})*", name):
                yield "text", "".join(chr(int(p.lstrip("uU"), 16)) for p in name.split("_"))
            else:
                yield "text", _CHARS.get(name, "")
        elif c == "*":
            name, i = _name(text, i)
            value = strings.get(name, "")
            budget[0] -= len(value)
            if depth < 8 and budget[0] >= 0:
                yield from _escapes(value, strings, budget, depth + 1)
        elif c == "s":
            m = re.match(r"[-+]?(\(\d\d|\[[^\]]*\]|'[^']*'|\d)?", text[i:])
            i += m.end() if m else 0
        elif c in _DELIMITED:
            if i < n:
                end = text.find(text[i], i + 1)
                inner = text[i + 1:end] if end >= 0 else ""
                i = end + 1 if end >= 0 else n
                if c == "N" and inner.isdigit():
                    yield "text", chr(int(inner)) if 32 <= int(inner) < 0x110000 else ""
        elif c in _NAMED:
            _, i = _name(text, i)
        elif c in "-":
            yield "text", "-"
        elif c in "e\\":
            yield "text", "\\"
        elif c in " ~0":
            yield "text", " "
        elif c == "t":
            yield "text", "\t"
        elif c == "'":
            yield "text", "'"
        elif c == "`":
            yield "text", "`"
        elif c == '"':  # a comment to the end of the line
            return
        elif c in "&)|^,/%:cdupazrE{}!?#":
            pass
        else:
            yield "text", c


def _name(text: str, i: int) -> tuple[str, int]:
    """The name after an escape: ``x``, ``(xx`` or ``[name]``."""
    if i >= len(text):
        return "", i
    if text[i] == "(":
        return text[i + 1:i + 3], i + 3
    if text[i] == "[":
        end = text.find("]", i)
        return (text[i + 1:end], end + 1) if end >= 0 else (text[i + 1:], len(text))
    return text[i], i + 1


def _joined(text: str) -> Iterator[str]:
    """Lines, with a line ending in a backslash continued on the next."""
    pending = ""
    for line in text.split("\n"):
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _skip_block(lines: Iterator[str], rest: str) -> None:
    """A macro definition or ``.ig``: up to its end (``..`` or the named end)."""
    words = rest.split()
    end = "." + words[1] if len(words) > 1 else ".."
    for line in lines:
        if line.strip() == end or line.strip().startswith(end + " "):
            return


def _skip_conditional(lines: Iterator[str], body: str) -> None:
    """``.if``/``.ie``/``.el``: dropped, with the block in ``\\{ ... \\}`` they open."""
    depth = body.count("\\{") - body.count("\\}")
    while depth > 0:
        line = next(lines, None)
        if line is None:
            return
        depth += line.count("\\{") - line.count("\\}")
