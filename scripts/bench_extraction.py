"""Quality of the offline (rule-based) g_T on labelled corpora: sets, label merging, triples, numbers.

    python scripts/bench_extraction.py                     # every corpus, summary table
    python scripts/bench_extraction.py --errors sets       # + every response the set extractor gets wrong
    python scripts/bench_extraction.py --code-root DIR     # the same corpora through the code under DIR
                                                           # (e.g. an exported older revision: before/after)

Corpora (tests/corpora/, our own text, CC-BY-4.0; conventions in docs/extraction.md):
- sets_corpus.yaml: model-style responses to multi-answer questions with the labels a careful
  reader takes from each; sets_smollm2_maqa.yaml: real SmolLM2 generations on maqa_bundled,
  labelled the same way (never used to develop the rules).
- graphs_corpus.yaml: summary sentences with their (head, relation, tail) triples.
- numbers_corpus.yaml: responses to numeric questions with the number they state (or none).

Printed figures (micro-averaged over responses):
- sets, extraction: label precision / recall / F1 of `extract_answers(text, question)` against
  the gold labels (exact canonical match), the share of responses whose whole set is right, and
  the number of extracted labels that are not a span of the response (must be 0);
- sets, after merging: the same after `SetExtractor(method="rule", equivalence=LabelMerger)`
  merged labels across each question's responses, scored at the answer level (a label counts
  for the answer whose alias list holds it), so a merge that replaces "china" by "china have
  long" or joins two answers costs precision and recall;
- graphs: triple precision / recall (exact canonical triples, relation stemmed the same way on
  both sides) and the same on (head, tail) pairs ignoring the relation;
- numbers: precision (right among the responses that got a number) and recall (right among the
  responses that state one), plus how many no-number responses got a number.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "tests" / "corpora"


# --------------------------------------------------------------------------- corpus loading

def load_yaml(name: str) -> dict:
    import yaml

    return yaml.safe_load((CORPORA / name).read_text(encoding="utf-8"))


def set_corpus(name: str = "sets_corpus.yaml") -> list[dict]:
    """Questions with their responses; every label is a str (YAML would read 1969 as int)."""
    questions = load_yaml(name)["questions"]
    for q in questions:
        q.setdefault("split", "holdout")
        for r in q["responses"]:
            r["labels"] = [str(x) for x in r["labels"]]
            r.setdefault("tags", [])
    return questions


# --------------------------------------------------------------------------- metrics

def label_prf(predicted: list[set], gold: list[set]) -> dict:
    """Micro-averaged precision/recall/F1 of label sets, plus the exact-set rate.

    Precision is 1 when nothing was predicted and recall 1 when nothing was to be found (no
    error was made), so a corpus of refusals scores 1/1 when every refusal maps to {}.
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold sets")
    tp = sum(len(set(p) & set(g)) for p, g in zip(predicted, gold))
    n_pred = sum(len(set(p)) for p in predicted)
    n_gold = sum(len(set(g)) for g in gold)
    precision = tp / n_pred if n_pred else 1.0
    recall = tp / n_gold if n_gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    exact = sum(set(p) == set(g) for p, g in zip(predicted, gold)) / len(gold) if gold else 1.0
    return {"n": len(gold), "tp": tp, "fp": n_pred - tp, "fn": n_gold - tp,
            "precision": precision, "recall": recall, "f1": f1, "exact": exact}


def is_span(label: str, text: str) -> bool:
    """`label` (canonical) occurs in the canonical response as a run of whole words."""
    from pipeline.text import canonical_label

    return f" {label} " in f" {canonical_label(text)} "


def answer_index(question: dict) -> dict[str, int]:
    """canonical alias -> answer number, for scoring at the answer level."""
    from pipeline.text import canonical_label

    index: dict[str, int] = {}
    for i, aliases in enumerate(question["answers"]):
        for alias in aliases:
            index.setdefault(canonical_label(str(alias)), i)
    return index


# --------------------------------------------------------------------------- sets

def evaluate_sets(questions: list[dict]) -> dict:
    from pipeline.mapping import extract_answers

    rows = []
    for q in questions:
        for r in q["responses"]:
            got = set(extract_answers(r["text"], q["question"]))
            rows.append({"id": q["id"], "split": q["split"], "question": q["question"], "text": r["text"],
                         "tags": r["tags"], "gold": set(r["labels"]), "got": got,
                         "not_spans": sorted(x for x in got if not is_span(x, r["text"]))})
    out = {"all": label_prf([r["got"] for r in rows], [r["gold"] for r in rows]), "rows": rows}
    for split in ("dev", "holdout"):
        sel = [r for r in rows if r["split"] == split]
        if sel:
            out[split] = label_prf([r["got"] for r in sel], [r["gold"] for r in sel])
    out["not_spans"] = sum(len(r["not_spans"]) for r in rows)
    tags = defaultdict(list)
    for r in rows:
        for t in r["tags"]:
            tags[t].append(r)
    out["tags"] = {t: label_prf([r["got"] for r in rs], [r["gold"] for r in rs]) for t, rs in sorted(tags.items())}
    return out


def evaluate_merging(questions: list[dict]) -> dict:
    """Answer-level P/R after the rule extractor + LabelMerger over each question's responses."""
    from pipeline.mapping.labels import LabelMerger
    from pipeline.mapping.sets import SetExtractor

    predicted, gold, wrong = [], [], []
    for q in questions:
        index = answer_index(q)
        extractor = SetExtractor(method="rule", equivalence=LabelMerger().cluster)
        merged = extractor.map_prompt(q["question"], [r["text"] for r in q["responses"]])
        for r, labels in zip(q["responses"], merged):
            pred = {index.get(x, ("unknown", x)) for x in (labels or ())}
            want = {index[x] for x in r["labels"]}
            predicted.append(pred)
            gold.append(want)
            if pred != want:
                names = {i: q["answers"][i][0] for i in range(len(q["answers"]))}
                wrong.append((q["id"], r["text"], sorted(labels or ()),
                              sorted(names[i] for i in want)))
    return {"all": label_prf(predicted, gold), "wrong": wrong}


def check_set_corpus(questions: list[dict]) -> list[str]:
    """Problems of the corpus itself: labels not canonical, not spans, not among the answers."""
    from pipeline.text import canonical_label

    problems = []
    for q in questions:
        index = answer_index(q)
        for r in q["responses"]:
            for label in r["labels"]:
                if canonical_label(label) != label:
                    problems.append(f"{q['id']}: label {label!r} is not canonical")
                if not is_span(label, r["text"]):
                    problems.append(f"{q['id']}: label {label!r} is not a span of {r['text']!r}")
                if label not in index:
                    problems.append(f"{q['id']}: label {label!r} is not in the answer list")
            if len(set(r["labels"])) != len(r["labels"]):
                problems.append(f"{q['id']}: duplicate labels in {r['labels']}")
    return problems


# --------------------------------------------------------------------------- graphs

def graph_corpus() -> list[dict]:
    return load_yaml("graphs_corpus.yaml")["texts"]


def canonical_gold_triple(triple: list[str]) -> tuple[str, str, str]:
    """Gold triples pass through the extractor's own canonical form (entities canonical,
    relation verbs stemmed), so both sides are compared in one vocabulary."""
    from pipeline.mapping.graphs import _canonical_triple

    t = _canonical_triple(*triple)
    if t is None:
        raise ValueError(f"gold triple {triple} has an empty part")
    return t


def evaluate_graphs(texts: list[dict]) -> dict:
    from pipeline.mapping.graphs import extract_triples

    pred, gold, pred_pairs, gold_pairs, rows = [], [], [], [], []
    for item in texts:
        got = set(extract_triples(item["text"]) or ())
        want = {canonical_gold_triple(t) for t in item["triples"]}
        pred.append(got)
        gold.append(want)
        pred_pairs.append({(h, t) for h, _, t in got})
        gold_pairs.append({(h, t) for h, _, t in want})
        rows.append({"text": item["text"], "got": got, "gold": want, "split": item.get("split", "dev"),
                     "id": f"{len(rows):02d}"})
    out = {"triples": label_prf(pred, gold), "pairs": label_prf(pred_pairs, gold_pairs), "rows": rows}
    for split in ("dev", "holdout"):
        idx = [i for i, r in enumerate(rows) if r["split"] == split]
        if idx:
            out[f"triples_{split}"] = label_prf([pred[i] for i in idx], [gold[i] for i in idx])
    return out


# --------------------------------------------------------------------------- numbers

def number_corpus() -> list[dict]:
    return load_yaml("numbers_corpus.yaml")["responses"]


def number_scores(predicted: list[float | None], gold: list[float | None], rel_tol: float = 1e-9) -> dict:
    """Precision: right among responses given a number; recall: right among responses that
    state one; false_numbers: responses without a number that were given one."""
    right = sum(p is not None and g is not None and math.isclose(p, g, rel_tol=rel_tol, abs_tol=1e-12)
                for p, g in zip(predicted, gold))
    n_pred = sum(p is not None for p in predicted)
    n_gold = sum(g is not None for g in gold)
    false_numbers = sum(p is not None and g is None for p, g in zip(predicted, gold))
    return {"n": len(gold), "right": right, "precision": right / n_pred if n_pred else 1.0,
            "recall": right / n_gold if n_gold else 1.0, "false_numbers": false_numbers,
            "no_number_responses": len(gold) - n_gold}


def evaluate_numbers(items: list[dict]) -> dict:
    from pipeline.score_numbers import parse_number

    pred = [parse_number(it["text"]) for it in items]
    gold = [None if it["value"] is None else float(it["value"]) for it in items]
    rows = [{"text": it["text"], "got": p, "gold": g, "split": it.get("split", "dev"), "id": f"{i:02d}"}
            for i, (it, p, g) in enumerate(zip(items, pred, gold))]
    out = {"all": number_scores(pred, gold), "rows": rows}
    for split in ("dev", "holdout"):
        idx = [i for i, r in enumerate(rows) if r["split"] == split]
        if idx:
            out[split] = number_scores([pred[i] for i in idx], [gold[i] for i in idx])
    return out


# --------------------------------------------------------------------------- printing

def _fmt(m: dict) -> str:
    return (f"n={m['n']:4d}  precision {m['precision']:.3f}  recall {m['recall']:.3f}  "
            f"F1 {m['f1']:.3f}  exact sets {m['exact']:.3f}  (tp {m['tp']}, fp {m['fp']}, fn {m['fn']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code-root", type=Path, help="import `pipeline` from this folder instead")
    parser.add_argument("--errors", nargs="*", default=[], choices=["sets", "real", "merge", "graphs", "numbers"],
                        help="also print the responses each part gets wrong")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.code_root.resolve() if args.code_root else ROOT))

    corpus = set_corpus()
    real = set_corpus("sets_smollm2_maqa.yaml")
    problems = check_set_corpus(corpus) + check_set_corpus(real)
    if problems:
        print("corpus problems:\n  " + "\n  ".join(problems))
        return 1

    print(f"code: {sys.path[0]}")
    print(f"\nSets, extraction (extract_answers), {len(corpus)} questions:")
    res = evaluate_sets(corpus)
    for part in ("all", "dev", "holdout"):
        print(f"  corpus {part:8s} {_fmt(res[part])}")
    print(f"  labels that are not a span of their response: {res['not_spans']}")
    real_res = evaluate_sets(real)
    print(f"  SmolLM2 maqa   {_fmt(real_res['all'])}")
    print(f"  labels that are not a span of their response: {real_res['not_spans']}")
    print("  by tag (corpus): " + ", ".join(f"{t} {m['precision']:.2f}/{m['recall']:.2f}"
                                            for t, m in res["tags"].items()))

    merged = evaluate_merging(corpus)
    merged_real = evaluate_merging(real)
    print("\nSets, after merging labels across responses (answer level):")
    print(f"  corpus         {_fmt(merged['all'])}")
    print(f"  SmolLM2 maqa   {_fmt(merged_real['all'])}")

    graphs_path = CORPORA / "graphs_corpus.yaml"
    if graphs_path.exists():
        g = evaluate_graphs(graph_corpus())
        print(f"\nGraphs (extract_triples), {len(g['rows'])} texts:")
        print(f"  triples        {_fmt(g['triples'])}")
        for split in ("dev", "holdout"):
            if f"triples_{split}" in g:
                print(f"    {split:12s} {_fmt(g[f'triples_{split}'])}")
        print(f"  (head, tail)   {_fmt(g['pairs'])}")
    numbers_path = CORPORA / "numbers_corpus.yaml"
    if numbers_path.exists():
        n = evaluate_numbers(number_corpus())
        m = n["all"]
        print(f"\nNumbers (parse_number), {m['n']} responses ({m['no_number_responses']} state no number):")
        for part in ("all", "dev", "holdout"):
            if part in n:
                m = n[part]
                print(f"  {part:8s} n={m['n']:3d}  precision {m['precision']:.3f}  recall {m['recall']:.3f}  "
                      f"right {m['right']}  numbers read from no-number responses {m['false_numbers']}")

    def show(rows, key="got"):
        for r in rows:
            if r[key] != r["gold"] and not (isinstance(r[key], float) and isinstance(r["gold"], float)
                                            and math.isclose(r[key], r["gold"], rel_tol=1e-9)):
                where = f"[{r['split']}:{r['id']}] " if "id" in r else ""
                print(f"  - {where}{r['text']!r}\n      got  {sorted(r[key]) if isinstance(r[key], set) else r[key]}"
                      f"\n      want {sorted(r['gold']) if isinstance(r['gold'], set) else r['gold']}")

    if "sets" in args.errors:
        print("\nSet corpus errors:")
        show(res["rows"])
    if "real" in args.errors:
        print("\nSmolLM2 errors:")
        show(real_res["rows"])
    if "merge" in args.errors:
        print("\nMerging errors (corpus, SmolLM2):")
        for qid, text, labels, want in merged["wrong"] + merged_real["wrong"]:
            print(f"  - {qid}: {text!r}\n      got  {labels}\n      want {want}")
    if "graphs" in args.errors and graphs_path.exists():
        print("\nGraph errors:")
        show(g["rows"])
    if "numbers" in args.errors and numbers_path.exists():
        print("\nNumber errors:")
        show(n["rows"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
