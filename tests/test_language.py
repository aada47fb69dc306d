"""Language detection (issue 18): deskdex runs py3langid's model with its own numpy walk and a
mapped cache of the unpacked model. The answer must be py3langid's own, which is the oracle here:
real texts in many languages and scripts, random text over the whole automaton, edge cases."""

from __future__ import annotations

import inspect
import random
import time

import pytest
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from deskdex.converters import language

from .test_tokens import TEXTS

pytestmark = pytest.mark.slow  # the language model unpacked, checked against py3langid

# Real sentences of scripts and languages the model knows, beside the English of the stdlib.
SENTENCES = [
    "Die Häuser in der Altstadt sind sehr alt und schön, und die Straßen sind ruhig.",
    "Les chevaux mangent du foin dans la grange tous les matins avant le lever du soleil.",
    "Los niños juegan en el parque mientras sus padres hablan de la cosecha del año.",
    "Мы гуляли по Москве ночью, а потом вернулись в гостиницу у реки.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μία από τις αρχαιότερες πόλεις.",
    "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。",
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "서울은 대한민국의 수도이며 가장 큰 도시이다.",
    "القاهرة هي عاصمة مصر وأكبر مدنها، وتقع على ضفاف نهر النيل.",
    "תל אביב היא עיר על חוף הים התיכון במרכז ישראל.",
    "हिन्दी भारत की राजभाषा है और करोड़ों लोग इसे बोलते हैं।",
    "Warszawa jest stolicą Polski i największym miastem w kraju.",
    "Stockholm är Sveriges huvudstad och landets största stad.",
    "Helsinki on Suomen pääkaupunki ja maan suurin kaupunki.",
    "İstanbul, Türkiye'nin en kalabalık şehri ve ekonomik merkezidir.",
    "Hà Nội là thủ đô của nước Cộng hòa Xã hội chủ nghĩa Việt Nam.",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
]


@pytest.fixture(scope="module")
def oracle() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _texts() -> list[str]:
    rnd = random.Random(18)
    import argparse, collections, json, os, subprocess  # noqa: E401

    docs = [inspect.getdoc(obj) or "" for m in (argparse, collections, json, os, subprocess)
            for obj in [m, *vars(m).values()] if callable(obj) or obj is m]
    texts = list(TEXTS.values()) + SENTENCES + [d for d in docs if len(d) > 40][:80]
    texts += [s.upper() for s in SENTENCES[:4]]  # py3langid lowers an all-capital text
    # Random text over many blocks of Unicode: the walk must agree in every state, not only in
    # those real languages reach.
    for _ in range(200):
        texts.append("".join(chr(rnd.choice([rnd.randrange(0x20, 0x250), rnd.randrange(0x370, 0x3000),
                                              rnd.randrange(0x4E00, 0x9FFF)]))
                             for _ in range(rnd.randrange(1, 400))))
    texts += ["", "a", " " * 10, "\ud800 a lone surrogate", "é" * 3000, "ab" * 5000]
    return texts


def test_the_answer_is_py3langids(oracle, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    language._model.cache_clear()
    try:
        for text in _texts():
            ours, theirs = language.classify(text), oracle.classify(text)
            assert ours[0] == theirs[0], text[:80]
            assert ours[1] == pytest.approx(theirs[1], abs=1e-4), text[:80]
    finally:
        language._model.cache_clear()


def test_the_model_is_unpacked_once_then_mapped(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    language._model.cache_clear()
    try:
        first = language._model()
        folders = list((tmp_path / "cache" / "deskdex").iterdir())
        assert [f.name.startswith("langid-") for f in folders] == [True]
        assert sorted(p.name for p in folders[0].iterdir()) == sorted(
            [n + ".npy" for n in language._ARRAYS] + ["model.json"])
        language._model.cache_clear()

        def no_unpacking() -> language._Model:
            raise AssertionError("the cached model was not used")

        monkeypatch.setattr(language, "_unpacked", no_unpacking)
        t0 = time.perf_counter()
        mapped = language._model()
        assert time.perf_counter() - t0 < 0.5  # unpacking takes 0.7 s and more
        assert mapped.classes == first.classes and mapped.depth == first.depth
        assert language.detect(TEXTS["altstadt.txt"]) == "de"
    finally:
        language._model.cache_clear()


def test_an_unwritable_cache_costs_only_time(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    language._model.cache_clear()
    try:
        assert language.detect(TEXTS["chevaux.txt"]) == "fr"
        assert blocker.is_file()
    finally:
        language._model.cache_clear()
