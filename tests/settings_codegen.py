"""Writes core/typed_settings.py (deskdex.typed_settings), the typed view of the settings, from the one
settings table (``SETTINGS`` in core/settings.py): run ``.venv/bin/python -m tests.settings_codegen``
after adding or changing a setting. tests/test_typed_settings.py fails while the file and the table
differ, so the typed classes cannot drift from the table, and mypy still reads plain source (a class
built at import time would be ``Any`` to it).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from deskdex.settings import SETTINGS, SITE_KEYS, SITE_REQUIRED, SOURCE_KEYS, SOURCE_REQUIRED, Setting

TARGET = Path(__file__).resolve().parent.parent / "core" / "typed_settings.py"
WIDTH = 116

HEADER = '''\
"""The settings as typed objects. GENERATED from the one settings table (``SETTINGS`` in
core/settings.py) by ``.venv/bin/python -m tests.settings_codegen``: do not edit by hand;
tests/test_typed_settings.py fails while this file and the table differ.

``Config.settings`` (deskdex.settings) is a ``Settings`` whose values were checked against the table
(type and bounds) when it was made; each table of the file is a nested object
(``cfg.settings.crawl.delay``). Lists are tuples and tables read-only mappings: a daemon's threads
share one ``Settings``, and a change is a new one (``Config.given_over``), never an edit in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Required, TypedDict
'''


# The settings that are lists of tables: each table's TypedDict (name, keys, required keys, docstring).
RECORDS = {
    "crawl.sites": ("Site", SITE_KEYS, SITE_REQUIRED,
                    "One ``[[crawl.sites]]`` table, as ``deskdex crawl add`` writes it (webcrawl/config.py CrawlSite)."),
    "sources": ("SourceTable", SOURCE_KEYS, SOURCE_REQUIRED,
                "One ``[[sources]]`` table, as ``deskdex source add`` writes it (sources/config.py SourceEntry)."),
}


def annotation(s: Setting) -> str:
    """The Python type of a setting's value in the typed object."""
    if s.kind is list:
        return f"tuple[{RECORDS[s.name][0] if s.items is dict else _name(s.items)}, ...]"
    if s.kind is dict:
        return f"Mapping[str, {_name(s.items)}]"
    return _name(s.kind)


def _name(kind: type | None) -> str:
    assert kind in (bool, int, float, str), kind  # a new kind of setting needs a line here
    return kind.__name__


def literal(value: Any) -> str:
    """``value`` as source: strings in double quotes, as the project writes them."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "(" + "".join(f"{literal(v)}, " for v in value).rstrip(" ") + ")" if value else "()"
    return repr(value)


def default(s: Setting) -> str:
    if s.kind is dict:
        return "field(default_factory=dict)" if not s.default else \
            f"field(default_factory=lambda: {s.default!r})"
    return literal(s.default)


def docstring(s: Setting, indent: str) -> list[str]:
    text = f"{s.help} Allowed: {s.allowed}."
    lines = textwrap.wrap(text.replace('"""', "'''"), WIDTH - len(indent) - 3, break_on_hyphens=False)
    lines[0] = '"""' + lines[0]
    lines[-1] += '"""'
    return [indent + line for line in lines]


def klass(name: str, doc: str, settings: list[Setting], tables: dict[str, str]) -> list[str]:
    out = ["", "", "@dataclass(frozen=True, slots=True, kw_only=True)", f"class {name}:", f'    """{doc}"""', ""]
    for s in settings:
        out.append(f"    {s.key}: {annotation(s)} = {default(s)}")
        out += docstring(s, "    ")
    for table, cls in tables.items():
        out.append(f"    {table}: {cls} = field(default_factory={cls})")
        out.append(f'    """The ``[{table}]`` table."""')
    return out


def source() -> str:
    """The text of core/typed_settings.py for the settings table as it is."""
    site: list[str] = []
    for name, keys, required, doc in RECORDS.values():
        site += ["", "", f"class {name}(TypedDict, total=False):", f'    """{doc}"""', ""]
        site += [f"    {k}: {f'Required[{_name(t)}]' if k in required else _name(t)}" for k, t in keys.items()]
    tables: dict[str, str] = {}
    for s in SETTINGS:
        if s.table and s.table not in tables:
            tables[s.table] = s.table.capitalize() + "Table"
    out = [HEADER.rstrip("\n")] + site
    for table, cls in tables.items():
        out += klass(cls, f"The ``[{table}]`` table of the config file.", [s for s in SETTINGS if s.table == table], {})
    out += klass("Settings", "Every setting, typed (deskdex.settings ``Config.settings``).",
                 [s for s in SETTINGS if not s.table], tables)
    out += ["", "", "# The class of each table's object, for deskdex.settings to build them from the table's values.",
            "TABLES: dict[str, type[" + " | ".join(tables.values()) + "]] = {"
            + ", ".join(f'"{t}": {c}' for t, c in tables.items()) + "}"]
    return "\n".join(out) + "\n"


def main() -> int:
    text = source()
    if TARGET.exists() and TARGET.read_text() == text:
        print(f"{TARGET}: up to date")
        return 0
    TARGET.write_text(text)
    print(f"{TARGET}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
