"""Focused crawling: a text classifier that scores a page against a topic.

The topic is a few words or example documents. The classifier is a cosine similarity between
log-weighted term vectors (the page's words against the topic's), with stop words ignored; a page
is on topic at or above ``threshold``. The notes: pages on a topic tend to link to other pages on
it, so links found on on-topic pages are fetched first.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from deskdex.index import normalise

STOP = frozenset("""a an and are as at be but by for from has have he her his i in is it its of on or our she that the
their them there they this to was we were what when which who will with you your not no can all any more most other
some such than then these those into about also only over very just page home next previous""".split())


def terms(text: str) -> Counter[str]:
    return Counter(w for w in normalise(text).split() if w not in STOP and len(w) > 1 and not w.isdigit())


def _weights(counts: Counter[str]) -> dict[str, float]:
    return {t: 1 + math.log(c) for t, c in counts.items()}


@dataclass
class TopicClassifier:
    topic: dict[str, float]
    threshold: float = 0.1

    @classmethod
    def from_words(cls, words: str, threshold: float = 0.1) -> "TopicClassifier":
        return cls(_weights(terms(words)), threshold)

    @classmethod
    def from_documents(cls, texts: list[str], threshold: float = 0.1, top: int = 200) -> "TopicClassifier":
        """The topic as the ``top`` terms that occur most across the example documents."""
        df: Counter[str] = Counter()
        tf: Counter[str] = Counter()
        for text in texts:
            t = terms(text)
            df.update(t.keys())
            tf.update(t)
        best = sorted(tf, key=lambda w: (-df[w], -tf[w], w))[:top]
        return cls({w: 1 + math.log(tf[w]) for w in best}, threshold)

    def score(self, text: str) -> float:
        page = _weights(terms(text))
        if not page or not self.topic:
            return 0.0
        dot = sum(w * self.topic.get(t, 0.0) for t, w in page.items())
        # Page vector length is capped at the topic's: a long page mentioning the topic throughout
        # should not lose to a short one that mentions it once.
        norm_page = math.sqrt(sum(w * w for w in page.values()))
        norm_topic = math.sqrt(sum(w * w for w in self.topic.values()))
        return dot / (norm_topic * min(norm_page, max(norm_topic, 1.0) * 4))

    def on_topic(self, text: str) -> bool:
        return self.score(text) >= self.threshold
