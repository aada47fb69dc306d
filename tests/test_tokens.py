"""Tokens (issue 17): a change of script splits words, file and folder names are words of their
own field, and each document's body is stemmed in its own language. Real files, indexed and
searched by the CLI as a user runs it, and the catalog and index read back."""

from __future__ import annotations

import sqlite3
import zipfile
from pathlib import Path

import pytest

from .conftest import CLI, worded
from deskdex.converters import language
from deskdex.errors import QueryError
from deskdex.index import Collection, search

ODP_CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" office:version="1.2">
<office:body><office:presentation><draw:page draw:name="p1">
<draw:frame presentation:class="title"><draw:text-box><text:p>Embedded tables</text:p></draw:text-box></draw:frame>
<draw:frame><draw:text-box><text:p>Slides with a table of quarterly sales figures for the northern
region, shown to the board in the spring meeting.</text:p></draw:text-box></draw:frame>
</draw:page></office:presentation></office:body></office:document-content>"""

TEXTS = {
    "sets.txt": "Reading notes\n\nThe chapter by Goldrei的集合论 explains ordinals and cardinals, with many "
                "exercises about well ordered sets and the axiom of choice.",
    "moscow.txt": "Travel notes\n\nWe walked through Москваcity at night and then took the train back to the "
                  "hotel near the river, tired but happy.",
    "MyReport2024.txt": "Quarterly figures\n\nSales grew in the northern region while costs stayed flat for the "
                        "whole year, which pleased the board.",
    "ГодовойОтчёт2023.txt": "Numbers\n\nA table of numbers for the accountant, with nothing more to say about "
                            "it than that the totals add up.",
    "altstadt.txt": "Die Altstadt\n\nDie Häuser in der Altstadt sind sehr alt und schön. Viele Menschen wohnen "
                    "dort gern, weil die Straßen ruhig sind und die Kinder im Park spielen können.",
    "chevaux.txt": "La ferme\n\nLes chevaux mangent du foin dans la grange tous les matins, et le fermier les "
                   "regarde avec plaisir avant de partir travailler dans les champs.",
    "hills.txt": "On the hill\n\nThe houses on the hill were built long ago by farmers who wanted to see the "
                 "whole valley from their windows in the morning.",
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[CLI, Path]:
    root = tmp_path_factory.mktemp("tokens")
    home, docs = root / "home", root / "docs"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("[ocr]\nenabled = false\n")
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / name).write_text(text, encoding="utf-8")
    with zipfile.ZipFile(docs / "examples-emb_spreadsheet.odp", "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.presentation", compress_type=zipfile.ZIP_STORED)
        z.writestr("content.xml", ODP_CONTENT)
    with zipfile.ZipFile(docs / "bundle.zip", "w") as z:
        z.writestr("inner/QuarterlyBudgetPlan.txt", "Spending\n\nMoney set aside for the new roof and the garden.")
    cli = CLI(home)
    cli.run("index", str(docs))
    return cli, home


def found(cli: CLI, query: str) -> list[str]:
    return sorted(Path(h["path"]).name for h in worded(cli.json("search", query, "--limit", "50")))


def test_a_latin_word_glued_to_cjk_is_found_alone(indexed):
    cli, _ = indexed
    assert found(cli, "Goldrei") == ["sets.txt"]
    assert found(cli, "集合论") == ["sets.txt"]  # the CJK bigram fields still answer
    assert found(cli, '"Goldrei的集合论 explains"') == ["sets.txt"]  # a phrase across the change of script


def test_cyrillic_glued_to_latin_splits(indexed):
    cli, _ = indexed
    assert found(cli, "Москва") == ["moscow.txt"]
    assert found(cli, "city") == ["moscow.txt"]


def test_words_of_file_names(indexed):
    cli, _ = indexed
    hits = worded(cli.json("search", "example"))
    assert [Path(h["path"]).name for h in hits] == ["examples-emb_spreadsheet.odp"]
    assert hits[0]["title"] == "Embedded tables"  # found by its name, not its title
    assert found(cli, "report") == ["MyReport2024.txt"]
    assert found(cli, "MyReport2024") == ["MyReport2024.txt"]  # the whole name still
    assert found(cli, "examples-emb_spreadsheet.odp") == ["examples-emb_spreadsheet.odp"]
    assert found(cli, "отчёт") == ["ГодовойОтчёт2023.txt"]  # camelCase of any cased script


def test_an_archive_members_own_name_counts(indexed):
    cli, _ = indexed
    hits = worded(cli.json("search", "budget"))
    assert [h["uri"].rsplit("#", 1)[1] for h in hits] == ["inner/QuarterlyBudgetPlan.txt"]
    assert [h["uri"].rsplit("#", 1)[1] for h in cli.json("search", "plan")["hits"]] == ["inner/QuarterlyBudgetPlan.txt"]


def test_folder_names_are_words_and_path_filters_keep_their_meaning(indexed):
    cli, home = indexed
    docs = home.parent / "docs"
    assert "MyReport2024.txt" in found(cli, f"report in:{docs}")
    assert found(cli, "report in:/nowhere") == []


def test_each_language_is_stemmed_as_itself(indexed):
    cli, _ = indexed
    # Snowball German: Häuser -> haus, French: chevaux -> cheval; English: houses -> hous.
    assert found(cli, "Haus") == ["altstadt.txt"]
    assert found(cli, "cheval") == ["chevaux.txt"]
    assert found(cli, "house") == ["hills.txt"]
    assert found(cli, "Häuser Straße") == ["altstadt.txt"]


def test_lang_filter_and_json_key(indexed):
    cli, _ = indexed
    assert found(cli, "lang:de") == ["altstadt.txt"]
    assert found(cli, "lang:german") == ["altstadt.txt"]
    assert found(cli, "lang:fr OR lang:de") == ["altstadt.txt", "chevaux.txt"]
    hits = cli.json("search", "Haus")["hits"]
    assert hits[0]["lang"] == "de"
    assert cli.json("search", "house")["hits"][0]["lang"] == "en"


def test_unknown_language_is_a_query_error_with_its_position(indexed):
    _, home = indexed
    with Collection.open(str(home / "data")) as coll:
        with pytest.raises(QueryError) as err:
            search(coll, "haus lang:xx")
    assert err.value.position == len("haus lang:")
    assert "unknown language" in str(err.value)


def test_the_catalog_stores_the_language(indexed):
    _, home = indexed
    db = sqlite3.connect(home / "data" / "catalog.sqlite")
    langs = {Path(p).name: lang for p, lang in db.execute("SELECT path, lang FROM docs")}
    db.close()
    assert langs["altstadt.txt"] == "de" and langs["chevaux.txt"] == "fr" and langs["hills.txt"] == "en"


def test_snippets_highlight_stemmed_words_of_other_languages(indexed):
    cli, _ = indexed
    hit = cli.json("search", "Haus")["hits"][0]
    marked = [hit["snippet"][a:b] for a, b in hit["highlights"]]
    assert marked == ["Häuser"]
    hit = cli.json("search", "Goldrei")["hits"][0]
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["Goldrei"]


def test_language_codes_are_the_models():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    classes = set(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes)
    assert {language._ALIASES.get(c, c) for c in classes} == language.CODES


def test_an_index_of_an_earlier_schema_is_rebuilt_with_languages(tmp_path):
    """What an upgraded daemon meets: a catalog without the lang column, an index of schema 4.
    Opening it to write adds the column, rebuilds the index and tells each stored text's
    language, converting nothing."""
    from deskdex.converters import Block, Document
    from deskdex.index import Row
    from deskdex.index.fulltext import SCHEMA_VERSION

    data = str(tmp_path / "data")
    text = TEXTS["altstadt.txt"].split("\n\n")[1]
    with Collection.open(data, writable=True) as coll:
        doc = Document(uri="file:///d/altstadt.txt", mime="text/plain", title="Die Altstadt",
                       blocks=[Block.of("p", text)])
        coll.put(Row(uri="file:///d/altstadt.txt", path="/d/altstadt.txt", size=len(text), mtime=1.0), doc)
    db = sqlite3.connect(tmp_path / "data" / "catalog.sqlite")
    db.execute("ALTER TABLE docs DROP COLUMN lang")
    db.execute("UPDATE meta SET value='4' WHERE key='schema'")
    db.commit()
    db.close()
    with Collection.open(data, writable=True) as coll:
        assert coll.catalog.get_meta("schema") == SCHEMA_VERSION
        assert [Path(h["path"]).name for h in search(coll, "Haus")["hits"]] == ["altstadt.txt"]
        row = coll.catalog.get("file:///d/altstadt.txt")
        assert row is not None and row.lang == "de"
