"""Simhash as the lecture notes define it, and the texts that must get none."""

from __future__ import annotations

import random
from collections import Counter

from deskdex.index.simhash import MIN_WORDS, content_words, distance, simhash, simhash_of_counts, to_signed, to_unsigned, word_hash


def text(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(f"word{rng.randrange(2000)}" for _ in range(n))


def reference(counts: Counter[str]) -> int:
    """The four steps of the notes in plain Python, bit by bit."""
    v = [0] * 64
    for w, weight in counts.items():
        h = word_hash(w)
        for i in range(64):
            v[i] += weight if (h >> i) & 1 else -weight
    return sum(1 << i for i in range(64) if v[i] > 0)


def test_matches_the_procedure_in_the_notes():
    for seed in range(20):
        counts = Counter(content_words(text(300, seed)))
        assert simhash_of_counts(counts) == reference(counts)
    # Words outside ASCII (their UTF-8 is hashed), and weights that cancel out on some bits.
    rng = random.Random(5)
    for _ in range(20):
        counts = Counter({"".join(chr(rng.choice([rng.randint(97, 122), rng.randint(0x400, 0x4FF),
                                                  rng.randint(0x4E00, 0x4FFF), rng.randint(0x1F600, 0x1F640)]))
                                  for _ in range(rng.randint(1, 6))): rng.randint(1, 3)
                          for _ in range(rng.randint(1, 200))})
        assert simhash_of_counts(counts) == reference(counts)


def test_stable_across_runs_and_case():
    # Fixed values: a fingerprint stored in a catalog must mean the same thing in the next run.
    assert word_hash("deskdex") == 0x61D516286FF75A1C
    t = " ".join(f"w{i % 37}" for i in range(100))
    assert simhash(t) == simhash(t.upper()) == 0xE89ABE6CCF77E4CF


def test_small_edit_small_distance_different_text_far():
    a = text(500, 2)
    b = a + " one more sentence at the end"
    c = text(500, 3)
    assert distance(simhash(a), simhash(b)) <= 3
    assert distance(simhash(a), simhash(c)) > 10


def test_frequency_weights_matter():
    base = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon"
    heavy = base + " alpha" * 200
    assert simhash(heavy) != simhash(base)


def test_short_numeric_and_empty_get_none():
    assert simhash("") is None
    assert simhash("word") is None
    assert simhash(text(MIN_WORDS - 1, 4)) is None
    assert simhash(text(MIN_WORDS, 4)) is not None
    assert simhash(" ".join(str(i) for i in range(500))) is None  # a table of numbers
    assert simhash("page 1 of 12 " * 3 + " ".join(str(i) for i in range(300))) is None


def test_signed_round_trip():
    for fp in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        assert -(1 << 63) <= to_signed(fp) < 1 << 63
        assert to_unsigned(to_signed(fp)) == fp


def test_words_of_ascii_text_are_the_regexs():
    """checksums.words takes a faster path for ASCII text; its words must be the regex's, or the
    checksums and features of the same text would differ between ASCII and other text."""
    import random
    import re
    import unicodedata

    from deskdex.index.checksums import words

    rnd = random.Random(5)
    alphabet = [chr(c) for c in range(128)] + ["é", "ß", "K", "ﬁ", "İ", "\u00a0", "٣"]
    samples = ["", "   ", "snake_case and kebab-case, 3.14 x2", "Straße ﬁle İstanbul \u212a",
               "tab\tnew\nline\x00nul"] + ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(200)))
                                         for _ in range(500)]
    for text in samples:
        assert words(text) == re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()), repr(text)
