"""The paper's rows of the report's tables keep the paper's own best / runner-up marks (the
`emphasis` transcribed with its numbers, results/paper), never recomputed from the numbers: a tie
the paper marks once shows one bold, a merged cell of the paper is marked once. Our rows keep
their computed marks (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipeline.reporting import tables

PAPER_DIR = Path(__file__).resolve().parents[2] / "results" / "paper"


@pytest.fixture(scope="module")
def paper_gen() -> pd.DataFrame:
    return pd.read_csv(PAPER_DIR / "generation.csv")  # as build_report reads it


@pytest.fixture(scope="module")
def paper_uq() -> pd.DataFrame:
    return pd.read_csv(PAPER_DIR / "uq.csv")


def _uq(paper_uq, name: str) -> tables.Table:
    long = tables.uq_long(pd.DataFrame(), paper_uq, name, "bayes", "prr")
    return tables.Table.from_long(long, "estimator", tables.ESTIMATORS)


def _gen(paper_gen, ours: pd.DataFrame | None = None) -> tables.Table:
    long = tables.generation_long(
        pd.DataFrame() if ours is None else ours, paper_gen, "performance_generations"
    )
    return tables.Table.from_long(long, "method", tables.METHODS)


def _lines(text: str, model: str, row: str) -> list[str]:
    return [line for line in text.splitlines() if model in line and f" {row} " in line]


def test_a_tie_the_paper_marks_once_shows_one_bold(paper_uq):
    # Table 3, Gemma-3-12B, MAQA F1: SAR and R_Bayes both 0.726; the paper marks R_Bayes best and
    # SAR runner-up. Ranked from the numbers, both would be best.
    table = _uq(paper_uq, "uq_prr_bayes")
    col = ("maqa", "f1")
    sar, risk = ("gemma-3-12b-it", "sar", "paper"), ("gemma-3-12b-it", "bayes_risk", "paper")
    assert table.values.loc[sar, col] == table.values.loc[risk, col] == 0.726
    computed = tables._ranks(table.values, lower_better=False)
    assert computed.loc[sar, col] == computed.loc[risk, col] == 1  # what the report did before
    ranks = tables._ranks(table.values, False, None, table)
    assert (ranks.loc[risk, col], ranks.loc[sar, col]) == (1, 2)
    md = tables.render_markdown(table, "t", tables.ESTIMATOR_LABEL, lower_better=False)
    block = [line for line in md.splitlines() if line.startswith("| gemma-3-12b-it |")]
    assert sum(line.count("**0.726**") for line in block) == 1
    assert "**0.726**" in _lines(md, "gemma-3-12b-it", "R_Bayes (ours) | paper |")[0]
    assert tables.PAPER_MARKS_NOTE in md
    tex = tables.render_latex(table, "t", "tab:t", tables.ESTIMATOR_LABEL, lower_better=False)
    block = [line for line in tex.splitlines() if line.startswith("gemma-3-12b-it &")]
    assert sum(line.count(r"\textbf{0.726}") for line in block) == 1
    assert sum(line.count(r"\underline{0.726}") for line in block) == 1
    # Table 4, Qwen3-4B, MAQA-simplex KL: four estimators at 0.639, one best, one runner-up
    table = _uq(paper_uq, "uq_auc_bayes")
    ranks = tables._ranks(table.values, False, None, table)
    got = {
        e: ranks.loc[("qwen3-4b", e, "paper"), ("maqa_star", "kl")]
        for e in ("cocoa_msp", "msp", "sar", "bayes_risk")
    }
    assert got["cocoa_msp"] == 1 and got["msp"] == 2
    assert pd.isna(got["sar"]) and pd.isna(got["bayes_risk"])


def test_a_merged_cell_is_marked_once_on_its_row(paper_gen):
    # Table 2, Gemma-3-12B, TriviaQA: one grey cell 0.416 spans l_MAP, l_Sample and Bayes, bold
    # in the paper; results/paper expands it to three rows, each with the emphasis.
    table = _gen(paper_gen)
    ranks = tables._ranks(table.values, None, None, table)
    col = ("triviaqa", "exact_match_error")
    model = "gemma-3-12b-it"
    assert ranks.loc[(model, "bayes", "paper"), col] == 1
    assert ranks.loc[[(model, m, "paper") for m in ("map", "sample_mbr")], col].isna().all()
    md = tables.render_markdown(table, "t", tables.METHOD_LABEL, lower_better=None)
    assert "| **0.416** |" in _lines(md, model, "Bayes (ours) | paper |")[0]
    for label in ("l_MAP", "l_Sample"):
        assert "| 0.416 ‡ |" in _lines(md, model, f"{label} | paper |")[0]
    assert tables.merged_note(["Bayes (ours)"]) in md
    # Gemma-3-4B, COMET: Beam, Self-Consistency, l_MAP and the merged l_Sample/Bayes cell are
    # bold in the paper: four bolds, l_Sample's covered cell flagged, unmarked
    col = ("wmt19_fien", "comet")
    got = {
        m: ranks.loc[("gemma-3-4b-it", m, "paper"), col]
        for m in ("beam", "self_consistency", "map", "bayes", "sample_mbr", "ar")
    }
    assert [m for m, r in got.items() if r == 1] == ["beam", "self_consistency", "map", "bayes"]
    tex = tables.render_latex(table, "t", "tab:t", tables.METHOD_LABEL, lower_better=None)
    assert r"& 0.848$^\ddagger$ &" in _lines(tex, "gemma-3-4b-it", r"l\_Sample &")[0]
    assert r"$^\ddagger$ paper: one merged cell" in tex
    # the paper's generation tables mark the best only: no runner-up among its rows
    assert r"\underline" not in tex


def test_our_rows_keep_computed_marks_beside_the_papers(paper_gen):
    # ours: Beam and Bayes tie at 0.7 (both best, computed), Greedy 0.6 below; the paper's
    # Gemma-3-12B MAQA F1: Beam and Bayes both 0.684, both bold in the paper itself.
    ours = pd.DataFrame(
        [
            {
                "model": "gemma-3-12b-it",
                "method": m,
                "dataset": "maqa",
                "metric": "f1",
                "value": v,
                "n": 100,
            }
            for m, v in (("beam", 0.7), ("bayes", 0.7), ("greedy", 0.6))
        ]
    )
    table = _gen(paper_gen[paper_gen["model"] == "gemma-3-12b-it"], ours)
    ranks = tables._ranks(table.values, None, tables.too_small(table, 30), table)
    col = ("maqa", "f1")
    mine = {m: ranks.loc[("gemma-3-12b-it", m, "ours"), col] for m in ("beam", "bayes", "greedy")}
    assert mine == {"beam": 1, "bayes": 1, "greedy": 3}  # computed: a tie is two bests
    theirs = ranks.xs("paper", level="source")[col].dropna()
    assert theirs.to_dict() == {("gemma-3-12b-it", "beam"): 1, ("gemma-3-12b-it", "bayes"): 1}
    md = tables.render_markdown(table, "t", tables.METHOD_LABEL, lower_better=None)
    for label in ("Beam", "Bayes (ours)"):
        assert "| **0.700** |" in _lines(md, "gemma-3-12b-it", f"{label} | ours |")[0]
        assert "| **0.684** |" in _lines(md, "gemma-3-12b-it", f"{label} | paper |")[0]


def test_a_table_without_the_papers_marks_ranks_its_rows():
    # a long frame with no `emphasis` behind it (not results/paper): ranked as before
    long = pd.DataFrame(
        [
            {
                "model": "m",
                "estimator": e,
                "source": "paper",
                "dataset": "maqa",
                "metric": "f1",
                "value": v,
            }
            for e, v in (("msp", 0.7), ("sar", 0.7))
        ]
    )
    table = tables.Table.from_long(long, "estimator", tables.ESTIMATORS)
    assert table.marks is None
    md = tables.render_markdown(table, "t", tables.ESTIMATOR_LABEL, lower_better=False)
    assert md.count("**0.700**") == 2 and tables.PAPER_MARKS_NOTE not in md
