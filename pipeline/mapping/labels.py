"""Offline equivalence for short labels (answers, entities) across the responses of one prompt.

The paper merges labels with its LLM extractor / KGGen clustering and DeBERTa-MNLI. Offline, the
MiniLM similarity of "question + label" is dominated by the question ({Saturn, Jupiter} and
{German, French} collapse at any threshold that also merges paraphrases), so the default merges
labels by a deterministic rule instead: two labels are one when their canonical forms are equal or
the words of one are all contained in the other ("pacific" ~ "pacific ocean",
"da vinci" ~ "leonardo da vinci", "lennon" ~ "john lennon"), unless the extra words qualify a
different place ("ireland" vs "northern ireland", "york" vs "new york", "pacific" vs "north
pacific"). Clustering is greedy against each cluster's first member (as lm-polygraph's semantic
classes). A cluster is named by its most frequent member (`representatives`, below: the readers
of answers, triples and distributions merge their labels across a prompt's responses with it);
the answer reader (`answer_rules`) no longer produces fragments such as "china have long", so
containment cannot let a fragment stand for an answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.text.normal_forms import canonical_label

# (question, labels) -> one cluster id per label; `LabelMerger.cluster` and the equivalence
# judges' `cluster` fit.
EquivalenceFn = Callable[[str, list[str]], Sequence[int]]

# Words that carry no identity: "is" must not absorb "is located in" (graph relations).
_FUNCTION_WORDS = frozenset(
    "is was are were be been has have had do does did of in on at to for by with from as and or "
    "not no it its this that".split()
)


# Extra words that make a different entity, not a longer name of the same one.
QUALIFIERS = frozenset(
    "north south east west northern southern eastern western northeast northwest southeast southwest "
    "new old upper lower central greater little inner outer equatorial".split()
)


def _words(label: str) -> frozenset[str]:
    return frozenset(canonical_label(label).split())


def labels_equivalent(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    if wa == wb:
        return True
    shorter, longer = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return (
        shorter <= longer
        and bool(shorter - _FUNCTION_WORDS)
        and not (longer - shorter) & QUALIFIERS
    )


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


def representatives(
    question: str,
    occurrences: Sequence[str],
    equivalence: EquivalenceFn | None = None,
    attached: Sequence[str] = (),
) -> dict[str, str]:
    """Map every canonical label to its cluster's representative.

    `occurrences` lists labels with repetition (one entry per sample that contains it), so the
    representative is the most frequent label of its cluster; ties go to the first seen. Without
    `equivalence` each distinct label is its own cluster. `attached` labels (a reference's) are
    placed into those clusters without changing them: each takes the representative of the
    clusters it falls into when judged together with the samples' labels, or stands alone.
    """
    counts = Counter(occurrences)
    unique = list(dict.fromkeys(occurrences))  # first-seen order
    if equivalence is None or len(unique) < 2:
        rep = {label: label for label in unique}
    else:
        rep = _representatives(unique, _cluster_ids(equivalence, question, unique), counts)
    extra = [label for label in dict.fromkeys(attached) if label not in rep]
    if not extra:
        return rep
    if equivalence is None:
        return rep | {label: label for label in extra}
    ids = _cluster_ids(equivalence, question, unique + extra)
    return attach_labels(rep, dict(zip(unique + extra, ids)), unique, extra, counts)


def attach_labels(
    own_of: dict[str, str],
    joint_of: dict[str, Any],
    own: Sequence[str],
    attached: Sequence[str],
    counts: Counter | None = None,
) -> dict[str, str]:
    """`own_of` (the samples' label -> representative) extended to the attached labels (a
    reference's) without changing it. `joint_of` clusters samples' and attached labels judged
    together (label -> cluster key; absent: its own cluster). An attached label takes the
    representative of the sample labels in its joint cluster (the most frequent by `counts`,
    else the first seen); with none, the first attached label of that cluster."""
    out = dict(own_of)
    best: dict[Any, str] = {}
    for label in own:  # first-seen order keeps ties on the first
        key = joint_of.get(label, label)
        if key not in best or (counts is not None and counts[label] > counts[best[key]]):
            best[key] = label
    alone: dict[Any, str] = {}
    for label in attached:
        if label not in out:
            key = joint_of.get(label, label)
            out[label] = (
                own_of.get(best[key], best[key]) if key in best else alone.setdefault(key, label)
            )
    return out


def _cluster_ids(equivalence: EquivalenceFn, question: str, labels: list[str]) -> list[Any]:
    ids = list(equivalence(question, labels))
    if len(ids) != len(labels):
        raise ValueError(
            f"equivalence callable returned {len(ids)} cluster ids for {len(labels)} labels; it must return one per label"
        )
    return ids


def _representatives(unique: list[str], ids: list[Any], counts: Counter) -> dict[str, str]:
    best: dict[Any, str] = {}
    for label, cid in zip(unique, ids):  # iterating in first-seen order keeps ties on the first
        if cid not in best or counts[label] > counts[best[cid]]:
            best[cid] = label
    return {label: best[cid] for label, cid in zip(unique, ids)}
