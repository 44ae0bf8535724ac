"""The paper's vocabulary: which dataset is which column of its tables and under which label, its
LLMs, and which datasets, metrics and titles make up each of its tables and figures.

The generic reporting code (tables.py, figures.py, the report in __init__.py) reads every such
name from here and names no dataset itself; tests/test_generic_layers.py holds it to that. The
published numbers these go with are results/paper/*.csv (pipeline.runtime.resources.paper_dir).
"""

from __future__ import annotations

from pipeline.components.methods import BASELINE, F_BETA, OURS

# --- datasets: the paper's tasks, in its order, and their labels ------------------------------
TASK_ORDER = ["maqa", "triviaqa", "wmt19_fien", "cnn_dm", "maqa_star"]
# the tables' columns: (dataset, metric), in the paper's order
TABLE_COLUMNS = [
    ("maqa", "hamming"),
    ("maqa", "f1"),
    ("triviaqa", "exact_match_error"),
    ("wmt19_fien", "comet"),
    ("wmt19_fien", "cosine_distance"),
    ("cnn_dm", "hamming"),
    ("cnn_dm", "f1"),
    ("cnn_dm", "alignscore"),
    ("maqa_star", "kl"),
]
# a dataset's column header in the tables (with its latent space) ...
DATASET_LABEL = {
    "maqa": "MAQA {0,1}^K",
    "triviaqa": "TriviaQA [K]",
    "wmt19_fien": "WMT19 R^d",
    "cnn_dm": "CNN/DM G",
    "maqa_star": "MAQA* Simplex",
}
# ... and its label in the figures (two lines)
TASK_LABEL = {
    "maqa": "MAQA\n{0,1}^K",
    "triviaqa": "TriviaQA\n[K]",
    "wmt19_fien": "WMT19\nR^d",
    "cnn_dm": "CNN/DM\nG",
    "maqa_star": "MAQA*\nSimplex",
}

# --- models -----------------------------------------------------------------------------------
# "We evaluate instruction-tuned versions of Gemma 3 4B, Gemma 3 12B, Qwen 3 4B, and Qwen 3 30B
# A3E" (Sec. 5, Models), in the order of the appendix panels (Figs. 7-9).
PAPER_LLMS = ("qwen3-4b", "gemma-3-4b-it", "gemma-3-12b-it", "qwen3-30b-a3b")
# reported apart (Tables 7-8): the tables whose name ends in "72b" hold it alone, the others never
PAPER_72B = "qwen2.5-72b-instruct"

# --- tables -----------------------------------------------------------------------------------
TABLES = {
    # name: (kind, paper table id, title, target, score)
    "generation": (
        "generation",
        "performance_generations",
        "Generation quality per decoding method (Table 2)",
        None,
        None,
    ),
    "generation_72b": (
        "generation",
        "performance_generations_72b",
        "Generation quality, Qwen2.5-72B (Table 7)",
        None,
        None,
    ),
    "uq_prr_bayes": (
        "uq",
        "uq_prr_bayes",
        "UQ PRR, quality of the Bayes response (Table 3)",
        OURS,
        "prr",
    ),
    "uq_auc_bayes": (
        "uq",
        "uq_auc_bayes",
        "UQ concordance AUC, Bayes response (Table 4)",
        OURS,
        "auc",
    ),
    "uq_prr_beam": (
        "uq",
        "uq_prr_beam",
        "UQ PRR, quality of the beam response (Table 5)",
        BASELINE,
        "prr",
    ),
    "uq_auc_beam": (
        "uq",
        "uq_auc_beam",
        "UQ concordance AUC, beam response (Table 6)",
        BASELINE,
        "auc",
    ),
    # The F1 reading of MAQA/CNN-DM (paper: "We study both the Hamming distance and the F1 score
    # as dissimilarity measures"): the F1-optimal (GFM) response's quality; no published numbers.
    "uq_prr_bayes_fbeta": (
        "uq",
        "uq_prr_bayes_fbeta",
        "UQ PRR, quality of the F1-optimal Bayes response (F1 reading)",
        F_BETA,
        "prr",
    ),
    "uq_72b": ("uq", "uq_72b", "UQ PRR, Bayes response, Qwen2.5-72B (Table 8)", OURS, "prr"),
}

# The beam-target tables (5-6) score P(True) on another answer than MSP and CoCoA wherever greedy
# and beam differ; they say so (docs/fidelity.md "P(True) answer; MSP / CoCoA target").
PTRUE_GREEDY_NOTE = (
    "P(True) is computed on the greedy text, as lm-polygraph 0.5.0's default "
    "does; MSP and CoCoA on the beam output (App. B.4)."
)
# The paper's Table 5 (PRR, beam response) repeats Table 3's body number for number; our
# transcription keeps it as printed (results/paper/README.md).
NOTES = {
    "uq_prr_beam": "Paper rows: the paper's Table 5 body is identical to its Table 3 "
    "(a defect of the paper), transcribed as printed. " + PTRUE_GREEDY_NOTE,
    "uq_auc_beam": PTRUE_GREEDY_NOTE,
}

# --- figures ----------------------------------------------------------------------------------
# Numbered as the paper's figure environments, in order (main text, then appendix): Fig. 1 the
# framework sketch; Fig. 2 a-c the three UQ panels (fig:uq_rank_prr, fig:uq_maqa_prr,
# fig:uq_latent_entropy_vs_risk); Fig. 3 fig:hamming_distance_improvement; Figs. 4-6 the samples
# ablation (fig:computation_maqa, fig:computation_uq_maqa_bayes, fig:computation_uq_maqa_beam);
# Figs. 7-9 the per-LLM improvement (fig:app_multianswer, fig:app_mt, fig:app_simplex).
# Fig. 2a's paper panel: its data (figures/uq_prr.pgf) is not in the source; results/paper/
# prr_rank.csv recomputes it from Table 3 (tab:uq_prr_bayes), and the panel says so.
RANK_PAPER_TITLE = (
    "Paper, derived from Table 3 (4 LLMs)\n(mean rank of its PRRs; not the paper's figure data)"
)
# Fig. 2b (PRR per UQ method on one dataset and metric, the paper's table's numbers beside ours)
PRR_FIGURE = "uq_maqa_prr"
PRR_DATASET, PRR_METRIC, PRR_PAPER_TABLE = "maqa", "f1", "uq_prr_bayes"
PRR_TITLE = "PRR per UQ method on MAQA (sets)"
PRR_YLABEL = "PRR (F1 of the Bayes response)"
# Fig. 2c's input file: figures/latent_entropy_vs_risk_gemma-3-12b-it.pgf
PAPER_ENTROPY_MODEL = "gemma-3-12b-it"
ENTROPY_DATASET = "maqa_star"  # Fig. 2c caption: "on MAQA ($\Delta^{K-1}$)"
# Fig. 3 (`hamming_improvement`): the improvement of l_Bayes, pooled over the compared models
IMPROVEMENT_DATASET, IMPROVEMENT_METRIC = "maqa", "hamming"
IMPROVEMENT_TITLE = (
    "Improvement of the Bayes response over each baseline (MAQA sets; top: prompts per bin)"
)
IMPROVEMENT_YLABEL = "Hamming(baseline) - Hamming(Bayes)"
IMPROVEMENT_EMPTY = "no MAQA data"
# Figs. 7-9 (appendix "Decoding"): file name -> (dataset, metric, what the caption names).
# Named after the paper's panel files (hamming_distance_improvement_MAQA_methods_<LLM>.pgf, ...).
IMPROVEMENT_FIGURES = {
    "hamming_distance_improvement_maqa": ("maqa", "hamming", "multi-answer QA"),
    "cosine_distance_improvement_wmt19_fien": (
        "wmt19_fien",
        "cosine_distance",
        "Machine Translation",
    ),
    "kl_divergence_improvement_maqa_star": ("maqa_star", "kl", "multi-answer QA (Simplex)"),
}
# Figs. 4-6 (`samples_ablation`): the number of samples M, on this dataset's cells
ABLATION_DATASET = "maqa"
ABLATION_TITLE = "MAQA sets: quality and uncertainty vs M (subsampled stored samples)"

# --- what a full report writes: tables as md/tex/csv, figures as png/pdf (results/...) -------
TABLE_NAMES = (
    "generation",
    "generation_72b",
    "uq_prr_bayes",
    "uq_auc_bayes",
    "uq_prr_beam",
    "uq_auc_beam",
    "uq_prr_bayes_fbeta",
    "uq_72b",
)
# (latent_entropy_vs_risk_pooled is written too with report_figures.entropy_pooled=true.)
FIGURE_NAMES = (
    "uq_prr_rank",
    "uq_maqa_prr",
    "latent_entropy_vs_risk",
    "hamming_improvement",
    "hamming_distance_improvement_maqa",
    "cosine_distance_improvement_wmt19_fien",
    "kl_divergence_improvement_maqa_star",
    "samples_ablation",
)
