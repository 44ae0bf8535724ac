"""Offline equivalence for short labels (answers, entities) across the responses of one prompt.

The paper merges labels with its LLM extractor / KGGen clustering and DeBERTa-MNLI. Offline, the
MiniLM similarity of "question + label" is dominated by the question ({Saturn, Jupiter} and
{German, French} collapse at any threshold that also merges paraphrases), so the default merges
labels by a deterministic rule instead: two labels are one when their canonical forms are equal or
the words of one are all contained in the other ("pacific" ~ "pacific ocean",
"da vinci" ~ "leonardo da vinci", "lennon" ~ "john lennon"), unless the extra words qualify a
different place ("ireland" vs "northern ireland", "york" vs "new york", "pacific" vs "north
pacific"). Clustering is greedy against each cluster's first member (as lm-polygraph's semantic
classes). A cluster is named by its most frequent member (`sets.representatives`); the set
extractor (`answer_rules`) no longer produces fragments such as "china have long", so containment
cannot let a fragment stand for an answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.text import canonical_label

# Words that carry no identity: "is" must not absorb "is located in" (graph relations).
_FUNCTION_WORDS = frozenset(
    "is was are were be been has have had do does did of in on at to for by with from as and or "
    "not no it its this that".split())


# Extra words that make a different entity, not a longer name of the same one.
QUALIFIERS = frozenset(
    "north south east west northern southern eastern western northeast northwest southeast southwest "
    "new old upper lower central greater little inner outer equatorial".split())


def _words(label: str) -> frozenset[str]:
    return frozenset(canonical_label(label).split())


def labels_equivalent(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    if wa == wb:
        return True
    shorter, longer = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return shorter <= longer and bool(shorter - _FUNCTION_WORDS) and not (longer - shorter) & QUALIFIERS


class LabelMerger:
    """`cluster(question, labels) -> cluster ids` (the mappers' EquivalenceFn signature)."""

    name = "label-rules"

    def cluster(self, question: object, labels: Sequence[object]) -> list[int]:
        firsts: list[str] = []
        ids: list[int] = []
        for label in labels:
            text = str(label)
            for cid, first in enumerate(firsts):
                if labels_equivalent(text, first):
                    ids.append(cid)
                    break
            else:
                firsts.append(text)
                ids.append(len(firsts) - 1)
        return ids
