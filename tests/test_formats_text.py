"""The text family (Markdown, reST, source code, CSV/TSV, JSON, XML) and text encodings,
on files generated here and on the corpus."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.document import Document
from deskdex.converters.tagged import dumps, loads

from .conftest import need_corpus


def one(path: Path) -> Document:
    outcomes = convert(Source.from_path(path))
    assert outcomes[0].ok, outcomes[0].message
    doc = outcomes[0].document
    assert loads(dumps(doc)).text() == doc.text()  # every result serialises as tagged text
    return doc


def test_markdown(tmp_path: Path) -> None:
    p = tmp_path / "notes.md"
    p.write_text("---\nauthor: Ada Lovelace\n---\n# Analytical Engine\n\nIt weaves *algebraic patterns* "
                 "like a [loom](https://example.org/loom).\n\n## Notes\n\n- first note\n- second note\n\n"
                 "| col | val |\n|---|---|\n| cogs | 42 |\n\n```\nprint('engine')\n```\n", encoding="utf-8")
    doc = one(p)
    assert doc.mime == "text/markdown"
    assert doc.title == "Analytical Engine"
    assert [(h.text, h.level) for h in doc.headings()] == [("Analytical Engine", 1), ("Notes", 2)]
    assert "It weaves algebraic patterns like a loom." in doc.text()
    assert doc.meta["author"] == "Ada Lovelace"
    assert [r.text for r in doc.links()] == ["loom"]
    kinds = {b.kind for b in doc.blocks}
    assert {"li", "td", "pre", "p", "h"} <= kinds
    assert any(r.style == "em" and r.text == "algebraic patterns" for b in doc.blocks for r in b.runs)


def test_restructuredtext_never_includes_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRETWORD")
    p = tmp_path / "guide.rst"
    p.write_text(f"=========\nUser Guide\n=========\n\n:Author: Grace Hopper\n\nInstallation\n============\n\n"
                 f"Run the *installer* and wait patiently.\n\n- alpha item\n\n.. include:: {secret}\n\n"
                 f".. raw:: html\n\n   <b>RAWHTML</b>\n\n::\n\n   make install\n", encoding="utf-8")
    doc = one(p)
    assert doc.title == "User Guide"
    assert [h.text for h in doc.headings()] == ["Installation"]
    assert "Run the installer and wait patiently." in doc.text()
    assert doc.meta["author"] == "Grace Hopper"
    assert "make install" in doc.text()
    assert "TOPSECRETWORD" not in dumps(doc) and "RAWHTML" not in dumps(doc)
    assert "disabled" not in doc.text()  # docutils' own warnings are not the document's text


@pytest.mark.parametrize("name,language,code,symbol", [
    ("engine.py", "python", "import os\n\nclass Engine:\n    def run(self):\n        return 'spinning cogs'\n",
     "Engine"),
    ("main.go", "go", "package main\n\nfunc Spin() string {\n\treturn \"spinning cogs\"\n}\n", "Spin"),
    ("lib.rs", "rust", "pub fn spin() -> &'static str {\n    \"spinning cogs\"\n}\n", "spin"),
    ("app.js", "javascript", "export function spin() {\n  return 'spinning cogs';\n}\n", "spin"),
    ("x.h", "c", "/* spinning cogs */\nstruct Engine { int cogs; };\n", "Engine"),
])
def test_source_code(tmp_path: Path, name: str, language: str, code: str, symbol: str) -> None:
    p = tmp_path / name
    p.write_text(code, encoding="utf-8")
    doc = one(p)
    assert doc.mime == "text/x-source"
    assert doc.meta["code_language"] == language
    assert doc.title == name
    assert symbol in [h.text for h in doc.headings()]
    assert "spinning cogs" in doc.body_text()
    assert all(b.kind in ("pre", "h") for b in doc.blocks)


def test_csv_and_tsv(tmp_path: Path) -> None:
    p = tmp_path / "people.csv"
    p.write_text('name;city;note\nAlice;Paris;"likes; semicolons"\nBob;Berlin;plain words\n', encoding="utf-8")
    doc = one(p)
    assert doc.mime == "text/csv" and doc.title == "people.csv"
    assert doc.meta["columns"] == "name | city | note" and doc.meta["rows"] == "3"
    assert [b.text for b in doc.blocks][:6] == ["name", "city", "note", "Alice", "Paris", "likes; semicolons"]
    assert all(b.kind == "td" for b in doc.blocks)
    t = tmp_path / "people.tsv"
    t.write_text("name\tcity\nCarol\tLisbon, Portugal\n", encoding="utf-8")
    doc = one(t)
    assert doc.mime == "text/tab-separated-values"
    assert "Lisbon, Portugal" in [b.text for b in doc.blocks]


def test_json_and_json_lines(tmp_path: Path) -> None:
    p = tmp_path / "record.json"
    p.write_text('{"title": "Expedition Log", "count": 3, "entries": [{"text": "crossed the glacier"}, '
                 '{"text": "reached the summit", "tags": ["cold", "windy"]}]}', encoding="utf-8")
    doc = one(p)
    assert doc.title == "Expedition Log"
    assert "crossed the glacier" in doc.text() and "windy" in doc.text()
    assert "entries" not in doc.text() and "3" not in doc.text()  # keys and numbers are not text
    assert doc.meta["encoding"] == "utf-8"
    lines = tmp_path / "events.jsonl"
    lines.write_text('{"msg": "first event"}\n{"msg": "second event"}\n', encoding="utf-8")
    assert "second event" in one(lines).text()
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out = convert(Source.from_path(deep))[0]
    assert not out.ok and out.reason in ("hostile", "corrupt")


def test_xml_text_without_element_names_or_external_entities(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRETWORD")
    p = tmp_path / "book.xml"
    p.write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE book [<!ENTITY ext SYSTEM "file://{secret}">'
                 f'<!ENTITY co "Acme Corp">]>\n<book xmlns="urn:x"><title>Field Guide</title><chapter>'
                 f'Birds of &co; and &ext; the <i>northern</i> marshes</chapter></book>', encoding="utf-8")
    doc = one(p)
    assert doc.title == "Field Guide" and doc.meta["root"] == "book"
    assert [h.text for h in doc.headings()] == ["Field Guide"]
    assert "Birds of Acme Corp and the northern marshes" in " ".join(doc.text().split())
    assert "chapter" not in doc.text() and "TOPSECRETWORD" not in doc.text()


FRENCH = ("Le château de la forêt était très élégant. Les élèves ont étudié près de la fenêtre où brillait "
          "le soleil d'été. Ça coûte cher, déjà à Noël, mais la cuisine française reste délicieuse.")
RUSSIAN = ("Москва является столицей России. Мы читали интересную книгу об истории этого города. "
           "Погода сегодня очень хорошая, и дети играют в парке.")
JAPANESE = "東京は日本の首都です。私たちは昨日、美しい公園を散歩しました。日本語の文章を正しく読むことは大切です。"
CHINESE = "北京是中国的首都。我们昨天在美丽的公园里散步。正确地阅读中文文本是很重要的。"


@pytest.mark.parametrize("encoding,text", [
    ("utf-8", "\n\n".join([FRENCH, RUSSIAN, JAPANESE, CHINESE])),
    ("utf-16", "\n\n".join([FRENCH, RUSSIAN, JAPANESE, CHINESE])),
    ("cp1252", FRENCH), ("latin-1", FRENCH), ("shift_jis", JAPANESE), ("gb18030", CHINESE), ("koi8-r", RUSSIAN),
])
def test_encodings_convert_to_the_same_words(tmp_path: Path, encoding: str, text: str) -> None:
    for suffix, mime in ((".txt", "text/plain"), (".md", "text/markdown")):
        p = tmp_path / f"sample{suffix}"
        p.write_bytes(text.encode(encoding))
        doc = one(p)
        assert doc.mime == mime
        assert doc.body_text().split() == text.split(), f"{encoding} read as {doc.meta.get('encoding')}"


@pytest.mark.corpus
@pytest.mark.parametrize("suffix", ["md", "rst", "xml", "csv", "json"])
def test_corpus_text_family(suffix: str) -> None:
    corpus = need_corpus()
    files = sorted(corpus.rglob(f"*.{suffix}"))
    if not files:
        pytest.skip(f"no .{suffix} files in the corpus")
    sample = random.Random(7).sample(files, min(40, len(files)))
    outcomes = [convert(Source.from_path(f))[0] for f in sample]
    ok = [o for o in outcomes if o.ok]
    failed = {o.uri: o.message for o in outcomes if not o.ok}
    assert not [o for o in outcomes if o.reason == "converter_bug"], failed
    assert len(ok) >= 0.85 * len(outcomes), failed
    assert sum(1 for o in ok if o.document.text().strip()) >= 0.8 * len(ok)


def test_json_of_keys_and_numbers_only_is_searchable_by_them(tmp_path: Path) -> None:
    p = tmp_path / "limits.json"
    p.write_text('{"fixture for issue #": 239, "retries": {"max_backoff": 3.5, "enabled": true}}')
    text = one(p).text()
    assert "fixture for issue #" in text and "239" in text and "max_backoff" in text and "3.5" in text


def test_xml_of_attributes_only_is_searchable_by_their_values(tmp_path: Path) -> None:
    rels = tmp_path / "document.xml.rels"
    rels.write_text('<?xml version="1.0"?><Relationships xmlns="urn:r"><Relationship Id="rId1" '
                    'Type="http://schemas.example/styles" Target="styles.xml"/><Relationship Id="rId2" '
                    'Target="media/lighthouse.png" TargetMode="Internal"/><n v="123"/></Relationships>')
    p = tmp_path / "settings.xml"
    p.write_bytes(rels.read_bytes())
    text = one(p).text()
    assert "media/lighthouse.png" in text and "styles.xml" in text and "123" not in text
    assert "Relationship" not in text  # element names stay markup
    # Beside text, attributes are markup: not indexed.
    mixed = tmp_path / "mixed.xml"
    mixed.write_text('<doc><p style="fancyborder">harbour report</p></doc>')
    assert "fancyborder" not in one(mixed).text() and "harbour report" in one(mixed).text()
