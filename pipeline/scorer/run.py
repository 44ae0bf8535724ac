"""Score your own generations: task-aware Bayes decisions and uncertainty without running an LLM.

    python -m pipeline.score examples/byo/sets.jsonl --task sets --out results.parquet
    import pipeline
    df = pipeline.score("examples/byo/sets.jsonl", task="sets", out="results.parquet")
    df = pipeline.score([["Paris", "Paris", "Lyon"]], task="classes")

The input (JSONL, parquet, an lm-evaluation-harness samples file or the same rows in memory;
`pipeline.scorer.readers`) becomes
the `dataset` and `samples` artifacts (plus empty `decodes` and `ptrue`) of an ArtifactStore in a
work directory; the pipeline's own map, decide, uq and evaluate stages then run on it through
`pipeline.artifacts.stage.run_stage`, with their caching: a rerun on the same file and options redoes
nothing, a changed option redoes only the stages it feeds. The uq stage runs with
`uq.estimators=[latent_entropy,bayes_risk]`: lm-polygraph's estimators need greedy/beam decodes and
token log-probs that generations from elsewhere usually lack.

A task is any task config (pipeline/tasks/<name>/task.yaml, or task/<name>.yaml in a config folder): its reference kind reads the references of
the file (pipeline/tasks/), its mapper, decisions and metrics are those of the pipeline. This
module only turns the file into artifacts and the artifacts into one row per prompt.

Output: one row per prompt (see `OUTPUT_COLUMNS` and docs/score.md), plus a summary of how well
the Bayes risk and the latent entropy predict the quality of the Bayes decision (PRR, concordance
AUC, bootstrap intervals) in `OUT.summary.csv` and the mean quality per method in
`OUT.quality.csv`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.artifacts.schema import ARTIFACTS, SCORER_PRODUCER
from pipeline.artifacts.store import ArtifactStore, cell_lock
from pipeline.components.methods import METHODS, OURS, method_column, methods
from pipeline.components.registry import plugin_code
from pipeline.latent.base import LatentSpace
from pipeline.mapping.settings import EXTRACTOR_KINDS
from pipeline.runtime.errors import is_disk_full, naming_a_full_disk
from pipeline.runtime.resources import conf_dir  # conf/ of the checkout or pipeline/conf in a wheel
from pipeline.runtime.stopping import check_stop, signals_held
from pipeline.scorer.readers import (
    FORMATS,
    IN_MEMORY,
    FieldNames,
    InputChunks,
    ReadAgain,
    RowProblem,
    ScoreInput,
    ScoreInputError,
    ScorePrompt,
    ScoreRowError,
    clean_value,
    format_problems,
    is_path,
)
from pipeline.scorer.report import (
    CONFIDENCE_COLUMN,
    ENTROPY_COLUMNS,
    OURS_COLUMN,
)
from pipeline.tasks.contract import REFERENCES
from pipeline.uncertainty.estimators import ESTIMATORS, risk_estimator

log = logging.getLogger("pipeline")

# Output names of the methods decided from the samples (the scorer has no decodes): l_MAP and
# l_Sample as in the paper (pipeline.components.methods).
METHOD_COLUMNS = {m: method_column(m) for m in methods("latent", "task")}
# the estimators that need no LLM: our decision's risk and the latent entropy
UQ_ESTIMATORS = (risk_estimator(OURS), *ENTROPY_COLUMNS)


def action_column(method: str) -> str:
    """l_map / l_sample hold the latent under the paper's name; the others as <name>_action."""
    col = method_column(method)
    return f"{col}_action" if col == method else col


SCORE_FORMAT_VERSION = 4  # bump when the input -> artifacts conversion changes
# A given answer to rate (`score(..., answers=...)`): a decode of this name, so the decide stage
# computes its risk under the samples as it does a greedy answer's
ANSWER_METHOD = "answer"


def task_names(config_dirs: Sequence[str | Path] = ()) -> list[str]:
    """The task configs (the built-in task folders, conf/task/*.yaml and those of `config_dirs`):
    each can score a file."""
    from pipeline.tasks import task_folders

    dirs = [conf_dir(), *map(Path, config_dirs)]
    return sorted(
        {
            *task_folders(),
            *(name for d in config_dirs for name in task_folders(d)),
            *(p.stem for d in dirs for p in (d / "task").glob("*.yaml")),
        }
    )


class ScoreWarning(UserWarning):
    """Something in the input was skipped or is suspicious; the run went on."""


# ---------------------------------------------------------------------------------------------
# references -> DATASET columns


def reference_columns(reference_kind: str, reference: Any, prompt_id: str) -> dict[str, Any]:
    """DATASET's answers / probabilities / reference_text for one raw reference, read by the
    task's reference kind (pipeline/tasks/), plus has_reference. The accepted shapes per task
    are listed in docs/score.md."""
    kind = REFERENCES[reference_kind]
    if reference is None:
        return {"answers": [], "probabilities": [], "reference_text": "", "has_reference": False}
    try:
        cols = clean_value(kind.from_user(reference))  # JSON inside a string: surrogates, depth
    except (ValueError, RecursionError, OverflowError) as exc:
        if isinstance(exc, ScoreRowError):
            raise
        raise ScoreRowError(
            "reference", f"reference {exc}", f"give {kind.description}", f"prompt {prompt_id!r}"
        ) from None
    return {**cols, "has_reference": kind.present(cols)}


# ---------------------------------------------------------------------------------------------
# artifacts


def input_frames(prompts: Sequence[ScorePrompt], reference_kind: str, dataset_name: str):
    """(dataset, samples, decodes, ptrue) DataFrames with the pipeline's columns, and the set of
    prompt ids that carry a reference."""
    import pandas as pd

    dataset_rows, sample_rows, answer_rows, with_reference = [], [], [], set()
    for p in prompts:
        if (answer := p.extra.get("answer")) is not None:  # rated as a decode of its own
            answer_rows.append(
                {
                    "prompt_id": p.prompt_id,
                    "strategy": ANSWER_METHOD,
                    "text": answer,
                    "token_logprobs": [],
                    "logprob": math.nan,
                }
            )
        cols = reference_columns(reference_kind, p.reference, p.prompt_id)
        if cols.pop("has_reference"):
            with_reference.add(p.prompt_id)
        dataset_rows.append(
            {"prompt_id": p.prompt_id, "dataset": dataset_name, "question": p.question, **cols}
        )
        for i, text in enumerate(p.responses):
            # No token log-probs come with outside generations: the sequence log-prob (when
            # given) is kept in `logprob`, token_logprobs stays empty; NaN = unknown.
            lp = p.logprobs[i] if p.logprobs is not None else math.nan
            sample_rows.append(
                {
                    "prompt_id": p.prompt_id,
                    "sample_idx": i,
                    "text": text,
                    "token_logprobs": [],
                    "logprob": float(lp),
                    "finish_reason": p.finish_reasons[i] if p.finish_reasons else "",
                }
            )

    def frame(name, rows):
        return pd.DataFrame(rows, columns=list(ARTIFACTS[name]))

    return (
        frame("dataset", dataset_rows),
        frame("samples", sample_rows),
        frame("decodes", answer_rows),
        frame("ptrue", []),
        with_reference,
    )


def _prompts_hash(prompts: Sequence[ScorePrompt]) -> str:
    """The hash of what was read (ids, questions, responses, log-probs, references, finish
    reasons): the key of in-memory input, and of each part of a large input (a part is scored
    from its own content, so a file that changed while read cannot leave a stale part)."""
    payload = [
        [
            p.prompt_id,
            p.question,
            p.responses,
            p.logprobs,
            p.reference,
            p.finish_reasons,
            *([p.extra["answer"]] if "answer" in p.extra else []),
        ]
        for p in prompts
    ]
    return hashlib.sha256(
        json.dumps(payload, sort_keys=True, default=repr, ensure_ascii=False).encode()
    ).hexdigest()


# ---------------------------------------------------------------------------------------------
# config


@contextmanager
def _hydra_context():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            yield
    finally:
        GlobalHydra.instance().clear()


def compose_config(
    task: str,
    mapper: str = "rule",
    overrides: Sequence[str] = (),
    dataset_name: str = "byo",
    config_dirs: Sequence[str | Path] = (),
    plugins: Sequence[str] = (),
    estimators: Sequence[str] = (),
):
    """The pipeline config for scoring: task group set to `task`, uq reduced to the estimators
    that need no LLM (plus `estimators`, baselines asked for), then the user's Hydra-style
    overrides (e.g. task.equivalence.threshold=0.9)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from pipeline.config import validate

    task = check_task(task, config_dirs)
    if mapper not in EXTRACTOR_KINDS:
        raise ScoreInputError(
            f"--mapper {mapper!r} is not known; choose one of {', '.join(EXTRACTOR_KINDS)}"
        )
    from pipeline.tasks import config_source

    extra = (
        [f"hydra.searchpath=[{','.join(config_source(d) for d in config_dirs)}]"]
        if config_dirs
        else []
    )
    if plugins:
        extra.append(f"plugins=[{','.join(plugins)}]")
    base = [
        *extra,
        f"task={task}",
        f"task.extractor.kind={mapper}",
        f"uq.estimators=[{','.join([*reversed(UQ_ESTIMATORS), *estimators])}]",
        f"dataset.name={dataset_name}",
        "wandb.enabled=false",
        "experiment=score",
    ]  # conf/experiment/score.yaml
    try:
        folders = [conf_dir(), *map(Path, config_dirs)]
        cfg = _composed(tuple(base + list(overrides)), _fingerprint(folders))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ScoreInputError(f"bad override in {list(overrides)}: {exc}") from None
    try:
        validate(cfg)
    except ValueError as exc:
        raise ScoreInputError(str(exc)) from None
    if cfg.task.name != task:
        raise ScoreInputError(
            f"override task.name={cfg.task.name} contradicts --task {task}; "
            "choose the task with --task only"
        )
    return cfg


_COMPOSED: dict[tuple, Any] = {}  # overrides -> config: a notebook's 2nd call is fast
_CELLS: dict[tuple, Any] = {}  # the same -> its resolved cell (read-only: shared, not copied)


def compose_cell(
    task: str,
    mapper: str = "rule",
    overrides: Sequence[str] = (),
    dataset_name: str = "byo",
    config_dirs: Sequence[str | Path] = (),
    plugins: Sequence[str] = (),
    estimators: Sequence[str] = (),
):
    """`compose_config` resolved once into the cell the stages take (`pipeline.config`): kept
    while the config files stay as they are, so a notebook's second call costs nothing here."""
    from pipeline.config import resolve_cell

    folders = [conf_dir(), *map(Path, config_dirs)]
    key = (
        task,
        mapper,
        tuple(overrides),
        dataset_name,
        tuple(map(str, config_dirs)),
        tuple(plugins),
        tuple(estimators),
        _fingerprint(folders),
    )
    if key not in _CELLS:
        _CELLS[key] = resolve_cell(
            compose_config(task, mapper, overrides, dataset_name, config_dirs, plugins, estimators)
        )
        if len(_CELLS) > 64:
            _CELLS.pop(next(iter(_CELLS)))
    return _CELLS[key]


def _fingerprint(folders: Sequence[Path]) -> tuple:
    """(path, size, mtime) of every config file under `folders`: an edited config is composed
    again."""
    return tuple(
        (str(p), st.st_size, st.st_mtime_ns)
        for folder in folders
        if folder.is_dir()
        for p in sorted(folder.rglob("*.yaml"))
        for st in [p.stat()]
    )


def _composed(overrides: tuple[str, ...], fingerprint: tuple = ()):
    """Hydra's config for `overrides`, composed once while the config files stay as they are
    (`fingerprint`; ~0.2 s a composition: a notebook's second call is fast). A copy each call:
    a caller may change its own."""
    import copy

    from hydra import compose

    key = (overrides, fingerprint)
    if key not in _COMPOSED:
        with _hydra_context():
            _COMPOSED[key] = compose("config", overrides=list(overrides))
        if len(_COMPOSED) > 64:
            _COMPOSED.pop(next(iter(_COMPOSED)))
    return copy.deepcopy(_COMPOSED[key])


def check_task(task: str, config_dirs: Sequence[str | Path] = (), python: bool = False) -> str:
    """`task` when it is a task config, or an error naming the closest and listing them all
    (`python`: in the wording of a Python call, task='sets', else the CLI's --task sets)."""
    import difflib

    names = task_names(config_dirs)
    given = str(task)
    if given not in names and given.replace("-", "_") in names:
        return given.replace(
            "-", "_"
        )  # the space is spelled sets-fbeta, its task config sets_fbeta
    if given not in names:
        said = f"task={given!r}" if python else f"--task {given!r}"
        close = difflib.get_close_matches(given.lower(), names, n=1, cutoff=0.5)
        hint = (
            f"; did you mean {f'task={close[0]!r}' if python else f'--task {close[0]}'}?"
            if close
            else ""
        )
        raise ScoreInputError(f"{said} is not known{hint} (tasks: {', '.join(names)})")
    return given


# ---------------------------------------------------------------------------------------------
# the run


def run_pipeline(store, cell, with_reference: set[str]) -> dict[str, Any]:
    """map -> decide -> uq -> evaluate through the pipeline's stages (evaluate scores only the
    prompts with a reference; none: it does not run); returns the frames."""
    from pipeline.artifacts.stage import run_stage

    for name in ("map", "decide", "uq") + (("evaluate",) if with_reference else ()):
        run_stage(name, cell, store)
    names = ("dataset", "samples", "decodes", "latents", "decisions", "uncertainty") + (
        ("quality", "uq_scores", "audit") if with_reference else ()
    )
    return {
        "quality": None,
        "uq_scores": None,
        "audit": None,
        "estimators": list(cell.uq.estimators),
        **{name: store.read(name) for name in names},
    }


def _sample_counts(out, samples, latents) -> None:
    """How each prompt's samples counted (docs/score.md): `n_samples` drawn, `n_parsed` read by
    g_T, `n_truncated` cut by the token limit, `n_no_answer` not read and counted as the outcome
    "no answer" (reading.unreadable=no_answer), `n_discarded` not read and dropped (the
    paper's rule, or a space without a no-answer latent); n_samples = n_parsed + n_no_answer +
    n_discarded."""
    rows = latents[latents["source"] == "sample"]
    ok = rows["parse_ok"].astype(bool)
    read = rows["read"].astype(bool) if "read" in rows else ok
    flags = rows[["prompt_id"]].assign(read=read, no_answer=ok & ~read).groupby("prompt_id")
    cut = (samples["finish_reason"] == "length") if "finish_reason" in samples else False
    counts = {
        "n_samples": samples.groupby("prompt_id").size(),
        "n_parsed": flags["read"].sum(),
        "n_truncated": samples[["prompt_id"]].assign(cut=cut).groupby("prompt_id")["cut"].sum(),
        "n_no_answer": flags["no_answer"].sum(),
    }
    # 1 distinct text of 20 says the sampler, not the model, decided
    counts["n_distinct_texts"] = (
        samples.assign(norm=[text_key(t) for t in samples["text"]])
        .groupby("prompt_id")["norm"]
        .nunique()
    )
    for name, values in counts.items():
        out[name] = out["prompt_id"].map(values).fillna(0).astype(int)
    out["n_discarded"] = out["n_samples"] - out["n_parsed"] - out["n_no_answer"]


def text_key(text: Any) -> str:
    """A sample's text compared without case and spacing (`n_distinct_texts`)."""
    return " ".join(str(text).split()).lower()


def abstention(space, action_json: str, n_samples: int, n_parsed: int, n_truncated: int) -> str:
    """The abstention in words where the Bayes answer gives none ("" where it answers): what a
    person reads instead of an empty answer (the report, the CLI, serve's refusal)."""
    unread = n_samples - n_parsed
    cut = f", {n_truncated} cut by the token limit" if n_truncated else ""
    why = f" ({unread} of {n_samples} samples could not be read{cut})" if unread else ""
    if action_json == "null":
        return f"abstains: no sample could be read{why}" if n_samples else "abstains: no samples"
    no_answer = space.no_answer()
    if no_answer is None or space.from_json(action_json) != no_answer:
        return ""
    if isinstance(no_answer, frozenset):  # sets, graphs: the paper's abstention
        return f"abstains: no answer is named by at least half of the samples{why}"
    return f"abstains: the samples' most frequent outcome is no readable answer{why}"


def _short_vector(action: str) -> str:
    """A long numeric vector (an embedding) as "<384-d vector>": unreadable in a table cell."""
    if action == "null" or not action.startswith("["):
        return action
    payload = json.loads(action)
    if len(payload) > 16 and all(isinstance(x, (int, float)) for x in payload):
        return f"<{len(payload)}-d vector>"
    return action


def output_frame(frames: dict[str, Any], with_reference: set[str], space=None):
    """One row per prompt: decisions, risks, latent entropy and quality per method, and how the
    answers were read (`response_labels`: each response's labels, null where it did not parse;
    with references, `reference_labels`, `label_matches` and `reading_warnings` of the audit)."""
    import pandas as pd

    dataset = frames["dataset"]
    out = pd.DataFrame({"prompt_id": dataset["prompt_id"], "question": dataset["question"]})
    _sample_counts(out, frames["samples"], frames["latents"])
    given = _decision_columns(out, frames)
    _uncertainty_columns(out, frames)
    out["has_reference"] = out["prompt_id"].isin(with_reference)
    _quality_columns(out, frames.get("quality"))
    for col in [c for c in map(action_column, METHOD_COLUMNS) if c in out]:
        out[col] = out[col].map(_short_vector)  # the texts say what an embedding means
    if space is not None:
        _reading_columns(out, frames, space, given)
    audit = frames.get("audit")
    if audit is not None and len(audit):
        a = audit.set_index("prompt_id")
        out["reference_labels"] = out["prompt_id"].map(a["reference_labels"].map(list))
        out["label_matches"] = out["prompt_id"].map(a["label_matches"])
        out["reading_warnings"] = out["prompt_id"].map(a["warnings"].map(list))
    return out


def _decision_columns(out, frames: dict[str, Any]):
    """Each decision's action, text and risk (a task's decision only where the task declares
    it) and, for answers to rate, the answer and its risk under the samples; returns the given
    answers' decisions (by prompt id; empty without answers)."""
    decisions = frames["decisions"]
    for method, col in METHOD_COLUMNS.items():
        d = decisions[decisions["method"] == method].set_index("prompt_id")
        if d.empty and METHODS[method].kind == "task":
            continue  # a decision this task does not declare
        out[action_column(method)] = out["prompt_id"].map(d["action"]).fillna("null")
        out[f"{col}_text"] = out["prompt_id"].map(d["text"]).fillna("")
        out[f"{col}_risk"] = out["prompt_id"].map(d["risk"]).astype(float)
    given = decisions[decisions["method"] == ANSWER_METHOD].set_index("prompt_id")
    if len(given):  # answers to rate: the text given and its risk under the samples
        texts = frames["decodes"].set_index("prompt_id")
        texts = texts[texts["strategy"] == ANSWER_METHOD]["text"]
        out["answer"] = out["prompt_id"].map(texts)
        out["answer_risk"] = out["prompt_id"].map(given["risk"]).astype(float)
    return given


def _uncertainty_columns(out, frames: dict[str, Any]) -> None:
    """A column per estimator: the scorer's own, then the baselines asked for (NaN where one
    has no value); a decision's risk has its column already."""
    unc = frames["uncertainty"]
    asked = [
        e
        for e in dict.fromkeys([*frames.get("estimators", ()), *unc["estimator"]])
        if e not in UQ_ESTIMATORS
    ]  # baselines asked for: a column each, NaN where none
    for est in (*UQ_ESTIMATORS, *asked):
        if ESTIMATORS[est].decision is not None:
            continue  # = that decision's <column>_risk above (same number, from the decide stage)
        u = unc[unc["estimator"] == est].set_index("prompt_id")["value"]
        out[est] = out["prompt_id"].map(u).astype(float)


def _quality_columns(out, quality) -> None:
    """`quality_<method>_<metric>` of each decision (and given answer) with a reference."""
    if quality is None or not len(quality):
        return
    for (method, metric), q in quality.groupby(["method", "metric"], sort=False):
        if method not in METHOD_COLUMNS and method != ANSWER_METHOD:
            continue
        out[f"quality_{METHOD_COLUMNS.get(method, method)}_{metric}"] = (
            out["prompt_id"].map(q.set_index("prompt_id")["value"]).astype(float)
        )


def _reading_columns(out, frames: dict[str, Any], space, given) -> None:
    """How the samples (and given answers) were read in the task's space (`_readings`), the
    Bayes answer's text as the space names it, and the abstention in words."""
    decisions, samples = frames["decisions"], frames["samples"]
    ours = decisions[decisions["method"] == OURS].set_index("prompt_id")["action"]
    logprobs = dict(zip(zip(samples["prompt_id"], samples["sample_idx"]), samples["logprob"]))
    answers = given["action"] if len(given) else None
    columns = _readings(space, frames["latents"], ours, logprobs, answers)
    for name, values in columns.items():
        if name in WHITEBOX_COLUMNS and not values:
            continue  # no log-probs in the input: no white-box column
        out[name] = out["prompt_id"].map(values)
    out[CONFIDENCE_COLUMN] = out[CONFIDENCE_COLUMN].astype(float)
    if "answer_confidence" in out:
        out["answer_confidence"] = out["answer_confidence"].astype(float)
    _answer_texts(out, space, samples, ours)
    column = f"{OURS_COLUMN}_text"
    out.insert(
        out.columns.get_loc(column) + 1,
        "abstention",
        [
            abstention(space, ours.get(pid, "null"), n, k, t)
            for pid, n, k, t in zip(
                out["prompt_id"], out["n_samples"], out["n_parsed"], out["n_truncated"]
            )
        ],
    )


# What score(lean=True) leaves out of the returned frame: per-sample and per-label Python
# objects (lists of lists, dicts, latents), ~9 KiB per prompt at M = 20; OUT has them
LEAN_DROPPED = ("response_labels", "latent_distribution", "reference_labels", "label_matches")


def lean_frame(written):
    """The rows without `LEAN_DROPPED` and the decisions' latents (their texts stay)."""
    latents = {action_column(m) for m in METHOD_COLUMNS}
    return written.drop(columns=[c for c in written.columns if c in latents or c in LEAN_DROPPED])


def python_objects(df, frames: dict[str, Any], space):
    """The scored frame as Python objects where files hold JSON: each decision's action as its
    latent (a frozenset of answers or edges, a class's str, a float, a dict of probabilities, a
    numpy vector; None where undecided), `response_labels` as lists (None for an unparsed
    response); `latent_distribution` stays JSON text ({label: share}, `json.loads` reads it)."""
    out = df.copy()
    decisions = frames["decisions"]
    for method in METHOD_COLUMNS:
        col = action_column(method)
        if col not in out:
            continue
        actions = decisions[decisions["method"] == method].set_index("prompt_id")["action"]
        decoded = {pid: space.from_json(a) for pid, a in actions.items() if a != "null"}
        out[col] = [decoded.get(pid) for pid in out["prompt_id"]]
    # latent_distribution stays JSON text, in memory as in every file: a dict per row made
    # to_parquet write a struct with one field per label (1,000 prompts: 2,000 fields)
    for col in ("response_labels", "answer_labels"):
        if col in out:
            out[col] = [json.loads(v) if isinstance(v, str) else None for v in out[col]]
    return out


def _answer_texts(out, space, samples, actions) -> None:
    """Where the space names its answer apart from the decision's text (classes: the label
    "Paris", not a member's sentence), `bayes_text` becomes that answer and the member's text
    moves to `bayes_member_text` (what the quality metrics read, as in the pipeline)."""
    if type(space).answer_text is LatentSpace.answer_text:
        return
    texts = samples.groupby("prompt_id", sort=False)["text"].agg(list)
    answers = {}
    for pid, action in actions.items():
        if action != "null":
            answer = space.answer_text(space.from_json(action), texts.get(pid, []))
            if answer:
                answers[pid] = answer
    column = f"{OURS_COLUMN}_text"
    at = out.columns.get_loc(column) + 1
    out.insert(at, f"{OURS_COLUMN}_member_text", out[column])
    out[column] = out["prompt_id"].map(answers).fillna(out[column])


# white-box scores from the samples' sequence log-probs (pipeline.uncertainty.whitebox): columns
# only when the input has log-probs (an endpoint's samples, or a file's `logprobs`)
WHITEBOX_COLUMNS = ("whitebox_msp", "whitebox_semantic_entropy")


def _readings(space, latents, actions, logprobs, answers=None) -> dict[str, dict[str, Any]]:
    """Column -> {prompt_id: value}: `response_labels` (each sample's labels as a JSON list,
    null where it did not parse; none for spaces without labels), `latent_distribution` (JSON
    {label: frequency}, most frequent first; "null" without labels), `confidence` (the Bayes
    answer's, `actions`: prompt_id -> its JSON, expected task quality under the samples:
    LatentSpace.confidence, docs/score.md) and, for prompts whose parsed samples all have a
    sequence log-prob (`logprobs`: (prompt_id, sample_idx) -> log-prob, NaN unknown),
    `whitebox_msp` and `whitebox_semantic_entropy` over the task's latents. Each sample's latent
    is decoded once. `answers` (prompt_id -> the JSON of a given answer's latent, "null" where
    it was not read): `answer_confidence` and `answer_labels` of each."""
    has_labels = type(space).labels is not LatentSpace.labels
    rows = latents[latents["source"] == "sample"].sort_values(
        ["prompt_id", "sample_idx"], kind="stable"
    )
    columns: dict[str, dict[str, Any]] = {
        name: {}
        for name in (
            "response_labels",
            "latent_distribution",
            CONFIDENCE_COLUMN,
            *WHITEBOX_COLUMNS,
            *(ANSWER_COLUMNS if answers is not None else ()),
        )
    }
    # each prompt's (latent JSON, parse_ok, sample_idx) as plain lists: a DataFrame per prompt
    # cost more than the readings themselves
    per_prompt: dict[str, list[tuple[str, bool, int, bool]]] = {}
    read = rows["read"] if "read" in rows else rows["parse_ok"]
    for pid, x, ok, i, was_read in zip(
        rows["prompt_id"], rows["latent"], rows["parse_ok"], rows["sample_idx"], read
    ):
        per_prompt.setdefault(pid, []).append((x, ok, i, was_read))
    for pid, group in per_prompt.items():
        lps = {i: logprobs.get((pid, i), math.nan) for _, _, i, _ in group}
        for name, value in prompt_readings(space, group, actions.get(pid), lps, has_labels).items():
            columns[name][pid] = value
        if answers is not None and pid in answers:
            for name, value in answer_readings(space, group, answers[pid], has_labels).items():
                columns[name][pid] = value
    return columns


ANSWER_COLUMNS = ("answer_confidence", "answer_labels")


def answer_readings(
    space, group: list[tuple[str, bool, int, bool]], answer_json: str, has_labels: bool
) -> dict[str, Any]:
    """A given answer's `answer_confidence` (its expected task quality under the samples, as
    `confidence` is the Bayes answer's: a sample not read agrees with no answer) and
    `answer_labels` (its labels as read, JSON; null where the answer could not be read)."""
    if answer_json is None or answer_json == "null":
        return {"answer_confidence": math.nan, "answer_labels": "null"}
    answer = space.from_json(answer_json)
    items = [space.from_json(x) for x, ok, _, _ in group if ok]
    read = [space.from_json(x) for x, ok, _, was_read in group if ok and was_read]
    out: dict[str, Any] = {
        "answer_confidence": read_confidence(space, items, answer, read) if items else math.nan
    }
    if has_labels:
        out["answer_labels"] = json.dumps(space.labels(answer), ensure_ascii=False)
    return out


def prompt_readings(
    space,
    group: list[tuple[str, bool, int, bool]],
    action_json: str | None,
    logprobs: dict[int, float],
    has_labels: bool,
) -> dict[str, Any]:
    """One prompt's reading columns (`_readings`): `group` holds each sample's (latent JSON,
    parse_ok, sample_idx, read) in sample order, `action_json` the Bayes action's JSON,
    `logprobs` sample_idx -> sequence log-prob (NaN unknown). Absent keys: no value."""
    from pipeline.uncertainty.whitebox import msp_of_answer, semantic_entropy

    out: dict[str, Any] = {}
    decoded = [space.from_json(x) if ok else None for x, ok, _, _ in group]
    if has_labels:  # null for a sample not read (also where it counts as "no answer")
        out["response_labels"] = json.dumps(
            [
                space.labels(x) if was_read else None
                for x, (_, _, _, was_read) in zip(decoded, group)
            ],
            ensure_ascii=False,
        )
    parsed = [(x, i) for x, (_, ok, i, _) in zip(decoded, group) if ok]
    read = [x for x, (_, _, _, was_read) in zip(decoded, group) if was_read]
    if not parsed:
        return out
    items = [x for x, _ in parsed]
    dist = space.distribution(items)
    out["latent_distribution"] = json.dumps(
        None if dist is None else {k: round(v, 6) for k, v in dist.items()}, ensure_ascii=False
    )
    action = None if action_json is None or action_json == "null" else space.from_json(action_json)
    out[CONFIDENCE_COLUMN] = (
        math.nan if action is None else read_confidence(space, items, action, read)
    )
    lps = [float(logprobs.get(i, math.nan)) for _, i in parsed]
    if action is not None and all(math.isfinite(lp) for lp in lps):
        canon = [space.canonical(x) for x in items]
        out["whitebox_semantic_entropy"] = semantic_entropy(lps, [space.key(x) for x in canon])
        out["whitebox_msp"] = msp_of_answer(lps, [space.distance(x, action) for x in canon])
    return out


def read_confidence(space, items: list, action, read: list) -> float:
    """`LatentSpace.confidence` of `action` where a sample counted as "no answer" (in `items`,
    not in `read`) agrees with no answer, the abstention included: sum over the read samples of
    agreement(action, l) / len(items). So a confidence never rests on samples that were not
    read (2 read of 20: at most 0.1); equal to `space.confidence(items, action)` when every
    sample was read (docs/score.md)."""
    if len(read) == len(items):
        return space.confidence(items, action)
    if not read:
        return 0.0
    return space.confidence(read, action) * len(read) / len(items)


def summary_frames(frames: dict[str, Any], **evaluation: Any):
    """(UQ summary: bayes_risk / latent_entropy vs the Bayes decision's quality, mean quality per
    method and metric) or (None, None) without references. Without `uq_scores` in `frames`
    they are computed from its quality and uncertainty (`evaluation`: settings over the
    scorer's, experiment=score)."""
    quality, scores = frames.get("quality"), frames.get("uq_scores")
    if quality is None or not len(quality):
        return None, None
    if scores is None:
        from pipeline.stages.evaluate import UQScoring, estimator_scores

        scoring = UQScoring.of({**_scorer_evaluation(), **evaluation}, targets=[OURS])
        scores = estimator_scores(quality, frames["uncertainty"], scoring)
    uq = scores[scores["target"] == OURS]  # the scorer's estimators and baselines asked for
    uq = uq.sort_values(["metric", "estimator"]).reset_index(drop=True)
    q = quality[quality["method"].isin(METHOD_COLUMNS)]
    mean = (
        q.groupby(["metric", "method"], sort=True)
        .agg(
            mean=("value", "mean"),
            n=("value", "size"),
            higher_is_better=("higher_is_better", "first"),
        )
        .reset_index()
    )
    mean["method"] = mean["method"].map(METHOD_COLUMNS)
    return uq, mean


def _scorer_evaluation() -> dict[str, Any]:
    """The evaluation settings `score` uses by default (experiment=score)."""
    from pipeline.tasks import task_folders

    # any task: the evaluation settings are the experiment's, not a task's
    ev = compose_cell(min(task_folders())).evaluation
    return {k: getattr(ev, k) for k in ("max_rejection", "ties", "n_bootstrap", "ci_alpha", "seed")}


OUT_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
SHOWN_PROBLEMS = 10  # skipped rows listed in the warning; all of them go to OUT.skipped.jsonl


def _out_stem(out: Path) -> str:
    stem = out.name
    for suffix in OUT_SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem


def summary_paths(out: Path) -> tuple[Path, Path]:
    stem = _out_stem(out)
    return out.with_name(stem + ".summary.csv"), out.with_name(stem + ".quality.csv")


def skipped_path(out: Path) -> Path:
    """Where the rows skipped for input problems are listed, next to OUT."""
    return out.with_name(_out_stem(out) + ".skipped.jsonl")


def _probe_dir(directory: Path, what: str) -> None:
    """Create `directory` if needed and check a file can be written in it (before any work)."""
    import os

    blocker = next((d for d in (directory, *directory.parents) if d.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ScoreInputError(f"{what}: {blocker} is a file, not a directory; choose another place")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".score-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ScoreInputError(
            f"{what}: cannot write in {directory} ({reason}); choose a writable place"
        ) from None


def check_output_path(out: Path, input_path: Path | None = None) -> None:
    """Fail early (before any scoring) when OUT cannot be written: wrong suffix, a directory,
    the input file itself, a directory that cannot be created or written."""
    if out.is_dir():
        raise ScoreInputError(
            f"--out {out} is a directory; give a file name, e.g. "
            f"{out / ('results' + (out.suffix or '.parquet'))}"
        )
    if out.suffix not in OUT_SUFFIXES:
        raise ScoreInputError(
            f"--out {out}: unknown suffix {out.suffix!r}; use .parquet, .jsonl or .csv"
        )
    if (
        input_path is not None
        and out.exists()
        and input_path.exists()
        and out.resolve() == input_path.resolve()
    ):
        raise ScoreInputError(
            f"--out {out} is the input file; writing it would destroy the input. "
            "Choose another name"
        )
    _probe_dir(out.parent, f"--out {out}")
    if out.exists():
        try:
            with out.open("r+b"):
                pass
        except OSError as exc:
            raise ScoreInputError(
                f"--out {out} exists and cannot be overwritten "
                f"({exc.strerror or exc}); choose another name"
            ) from None


def write_output(df, out: Path, to: Path | None = None) -> None:
    """The rows to `out` (its suffix says the format; `to`: the file written instead, e.g. a
    temporary name renamed to `out` later). `df` is a DataFrame, or the PartRows of an input
    scored in parts: written part after part, never all in memory at once."""
    if out.suffix not in OUT_SUFFIXES:
        raise ScoreInputError(
            f"--out {out}: unknown suffix {out.suffix!r}; use .parquet, .jsonl or .csv"
        )
    if to is None:
        with _atomic(out) as tmp:
            write_output(df, out, to=tmp)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(df, PartRows):
            _write_parts(df, out, to)
            return
        df = df.copy()
        df.attrs = {}  # the summaries are written beside it, not into the parquet metadata
        if out.suffix == ".parquet":
            df.to_parquet(to, index=False)
        elif out.suffix in (".jsonl", ".json"):
            df.to_json(to, orient="records", lines=True, force_ascii=False)
        else:
            df.to_csv(to, index=False)
    except OSError as exc:
        if is_disk_full(exc):
            raise  # naming_a_full_disk says it in one line
        raise ScoreInputError(f"--out {out}: cannot write it ({exc.strerror or exc})") from None


def _write_parts(parts: PartRows, out: Path, to: Path) -> None:
    """Each part's rows appended to `out`: parquet as one row group per part under the schema
    that unifies the parts' (a column all-null in one part takes another part's type)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if out.suffix == ".parquet":

        def tables():
            for frame in parts.frames():
                yield pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata()

        # the types of object columns are inferred from their values: a first pass for them
        schema = pa.unify_schemas([t.schema for t in tables()], promote_options="permissive")
        with pq.ParquetWriter(to, schema) as writer:
            for table in tables():
                writer.write_table(table.cast(schema))
        return
    with to.open("w", encoding="utf-8", newline="") as fh:
        for i, frame in enumerate(parts.frames()):
            if out.suffix == ".csv":
                frame.to_csv(fh, index=False, header=i == 0)
            else:
                frame.to_json(fh, orient="records", lines=True, force_ascii=False)


def write_skipped(problems: Sequence[RowProblem], path: Path) -> None:
    """The skipped rows as JSON lines: line (JSONL, 1-based) or row (parquet, 0-based), id,
    field, problem, fix."""
    try:
        with path.open("w", encoding="utf-8") as fh:
            for p in problems:
                fh.write(json.dumps(p.as_dict(), ensure_ascii=False) + "\n")
    except OSError as exc:
        if is_disk_full(exc):
            raise
        raise ScoreInputError(f"cannot write {path} ({exc.strerror or exc})") from None


def _skipped_message(problems: Sequence[RowProblem], n_rows: int, listed: Path | None) -> str:
    if listed is not None:
        where = f" (all of them in {listed})"
    elif len(problems) > SHOWN_PROBLEMS:
        where = (
            " (the full list: pass --out to write OUT.skipped.jsonl, or read "
            "df.attrs['skipped'] from Python)"
        )
    else:
        where = ""
    return (
        f"skipped {len(problems)} of {n_rows} input rows with problems{where}; --strict "
        f"stops at the first instead:\n{format_problems(problems, SHOWN_PROBLEMS)}"
    )


@dataclass(frozen=True, eq=False)
class ScoreRequest:
    """One `score` call: its options (`score`'s keywords, the input's field names as one
    `FieldNames`) and what they resolve to, checked as it is made, before any work (the first
    problem is the error, in the order the checks have always run). The scorer's internals take
    this one object; frozen: they read it, never change it. No `==`: the input may be a
    DataFrame."""

    input: Any  # a file's path, or the rows in memory
    task: str  # checked: the task config's name (sets-fbeta becomes sets_fbeta)
    mapper: str = "rule"
    fmt: str = "auto"
    out: str | Path | None = None
    fields: FieldNames = field(default_factory=FieldNames)
    overrides: Sequence[str] = ()
    work_dir: str | Path | None = None
    strict: bool = False
    config_dirs: Sequence[str | Path] = ()
    plugins: Sequence[str] = ()
    part_prompts: int | None = None  # checked: rows (or prompts) per part, PART_PROMPTS for None
    lean: bool = False
    answers: Any = None
    estimators: Sequence[str] = ()  # checked: the baselines asked for, known ones, each once
    # resolved from the options above as the request is made
    from_file: bool = field(init=False)
    path: Path = field(init=False)  # the input file, or IN_MEMORY
    out_path: Path | None = field(init=False)
    cell: Any = field(init=False, repr=False)  # the resolved pipeline config (compose_cell)
    answer_of: Callable[[ScorePrompt], str | None] = field(init=False, repr=False)
    answers_key: str | None = field(init=False)  # the answers' hash, in the input's key

    def __post_init__(self) -> None:
        task = check_task(self.task, self.config_dirs)
        estimators = _checked_estimators(self.estimators)
        if self.fmt not in FORMATS:
            raise ScoreInputError(
                f"--format {self.fmt!r} is not known; choose one of {', '.join(FORMATS)}"
            )
        from_file = is_path(self.input)
        path = Path(self.input) if from_file else IN_MEMORY
        out_path = Path(self.out) if self.out is not None else None
        if out_path is not None:
            check_output_path(out_path, path if from_file else None)
        if self.work_dir is not None:
            _probe_dir(Path(self.work_dir), f"--work-dir {self.work_dir}")
        cell = compose_cell(
            task,
            self.mapper,
            self.overrides,
            dataset_name=f"byo-{path.stem}" if from_file else "byo-data",
            config_dirs=self.config_dirs,
            plugins=self.plugins,
            estimators=estimators,
        )
        part_prompts = PART_PROMPTS if self.part_prompts is None else max(1, int(self.part_prompts))
        answer_of = _answer_lookup(self.answers, self.input, from_file)
        resolved = {
            "task": task,
            "estimators": estimators,
            "part_prompts": part_prompts,
            "from_file": from_file,
            "path": path,
            "out_path": out_path,
            "cell": cell,
            "answer_of": answer_of,
            "answers_key": _answers_key(self.answers),
        }
        for name, value in resolved.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    def reader(self) -> InputChunks:
        """The input's reader: its good rows a chunk (a part) at a time, each one `prepared`."""
        return InputChunks(
            self.path if self.from_file else self.input,
            self.fmt,
            self.fields,
            strict=self.strict,
            validate=self.prepared,
            chunk_rows=self.part_prompts,
        )

    def prepared(self, prompt: ScorePrompt) -> None:
        """A good row as it is read: its reference checked, its answer to rate attached."""
        reference_columns(self.cell.task.reference, prompt.reference, prompt.prompt_id)
        if (answer := self.answer_of(prompt)) is not None:
            prompt.extra["answer"] = answer

    def source(self, fmt: str) -> str:
        """What the input artifacts name as their source: the file, or data in memory's format."""
        return str(self.path) if self.from_file else fmt


def _answers_key(answers: Any) -> str | None:
    """The hash of the answers to rate (None: no answers): a changed answer is a new input."""
    if answers is None:
        return None
    given = answers if isinstance(answers, dict) else list(answers)
    return hashlib.sha256(json.dumps(given, sort_keys=True, default=str).encode()).hexdigest()


# size: the documented API: the README and docs/score.md call it with these keywords, and its
# docstring is their reference; the body only builds the one ScoreRequest and hands it on
def score(
    input: Any,
    task: str,
    mapper: str = "rule",
    *,
    fmt: str = "auto",
    out: str | Path | None = None,
    id_field: str | None = None,
    question_field: str | None = None,
    responses_field: str | None = None,
    reference_field: str | None = None,
    logprobs_field: str | None = None,
    lm_eval_filter: str | None = None,
    overrides: Sequence[str] = (),
    work_dir: str | Path | None = None,
    strict: bool = False,
    config_dirs: Sequence[str | Path] = (),
    plugins: Sequence[str] = (),
    part_prompts: int | None = None,
    lean: bool = False,
    answers: Any = None,
    estimators: Sequence[str] = (),
):
    """Score sampled responses: one row per prompt (module docstring, docs/score.md).

    Args:
        input: a JSONL / parquet / lm-evaluation-harness samples file, or data in memory: a
            pandas DataFrame, a list of dicts (`responses`, optional `question`, `reference`,
            `logprobs`, `id`) or a list of lists of response strings (`fmt` is then ignored).
        task: a task config (pipeline/tasks/<name>/task.yaml: classes, sets, sets_fbeta, graphs, sphere,
            simplex, reals, or your own).
        mapper: g_T kind for sets, graphs, simplex (task.extractor.kind): rule | llm | local.
        fmt: auto | jsonl | parquet | lm-eval.
        out: where to write the rows (.parquet, .jsonl or .csv); summaries go next to it, and
            the skipped rows (if any) to OUT.skipped.jsonl. Checked before any scoring.
        *_field: input field names (dotted paths reach nested fields, e.g. doc.question).
        lm_eval_filter: lm-eval files with several filters: which one to score.
        overrides: Hydra-style config overrides, e.g. ["task.equivalence.threshold=0.9"].
        work_dir: where the artifact store lives (default: OUT's name + ".work/", else a
            temporary directory removed afterwards).
        strict: stop at the first bad row (ScoreInputError naming its line) instead of
            skipping bad rows.
        config_dirs: more config folders (your own task/dataset configs, docs/extending.md).
        plugins: modules to import first (your own registrations).
        part_prompts: an input of more rows is read and scored in parts of this many rows
            (a JSON Lines file: read a chunk at a time, each chunk a part; parquet and data in
            memory: parts of this many prompts), default PART_PROMPTS = 2000, on every core,
            each part its own store; the same rows and summaries.
        lean: return only the columns that hold no per-sample Python objects (`LEAN_DROPPED`
            are left out: the decisions' latents, each response's labels, the latent
            distribution, the reference's labels and matches); every column still goes to
            `out`. The full frame costs ~9 KiB of memory per prompt (M = 20): ~0.9 GiB at 100k
            prompts; the CLI scores lean when it prints no --audit or --report.
        answers: answers to rate (uqlm's question: how sure is THIS answer, given the sampled
            responses?): a dict prompt id -> answer text, or for data in memory one answer per
            input row (None: no answer for that row). Each is read by the task's g_T like a
            response and gets `answer_risk` (its Bayes risk under the samples: the expected
            task loss), `answer_confidence` (its expected task quality, LatentSpace.confidence)
            and `answer_labels`; with references, `quality_answer_<metric>`.
        estimators: baseline UQ estimators to compute beside the Bayes risk and the latent
            entropy (pipeline.uncertainty: kle from the texts alone; semantic_entropy and sar
            need each sample's log-probs, msp / cocoa_msp a greedy decode, ptrue P(True),
            which outside generations usually lack: those get no value, with a warning).
            A column each, and rows of the PRR / AUC summary.

    Returns the per-prompt DataFrame of the good rows; `.attrs["summary"]` and
    `.attrs["quality_summary"]` hold the summaries as records (None without references;
    `summaries(df)` gives them as DataFrames), `.attrs["store"]`
    the artifact directory, `.attrs["skipped"]` the skipped rows (list of dicts: line or row, id,
    field, problem, fix; a ScoreWarning lists the first ones), `.attrs["n_rows"]` the rows read
    and `.attrs["replaced_surrogates"]` how many lone surrogates became U+FFFD.

    Raises ScoreInputError for bad files or options (the message names the problem and the fix).
    """
    request = ScoreRequest(
        input=input,
        task=task,
        mapper=mapper,
        fmt=fmt,
        out=out,
        fields=FieldNames(
            id=id_field,
            question=question_field,
            responses=responses_field,
            reference=reference_field,
            logprobs=logprobs_field,
            lm_eval_filter=lm_eval_filter,
        ),
        overrides=overrides,
        work_dir=work_dir,
        strict=strict,
        config_dirs=config_dirs,
        plugins=plugins,
        part_prompts=part_prompts,
        lean=lean,
        answers=answers,
        estimators=estimators,
    )
    reader = request.reader()
    try:
        return _score_input(reader, request)
    except ReadAgain as again:  # rare: a usual field or an lm-eval filter first in later rows
        log.info("[score] %s; reading the input again, whole", again)
        return _score_input(reader.again(), request)


def _checked_estimators(names: Sequence[str]) -> list[str]:
    """The baselines asked for, known ones only (before any work)."""
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        raise ScoreInputError(
            f"estimators={list(names)}: unknown {', '.join(unknown)}; "
            f"choose from {', '.join(ESTIMATORS.names())}"
        )
    return [n for n in dict.fromkeys(names) if n not in UQ_ESTIMATORS]


def _warn_missing_estimates(df, estimators: Sequence[str]) -> None:
    """A baseline asked for that got no value for some prompts: which, and what it reads."""
    for name in estimators:
        if name not in df or ESTIMATORS[name].decision is not None:
            continue  # a lean frame keeps the column; a decision's risk is always there
        missing = int(df[name].isna().sum())
        if missing:
            _warn(
                f"{name}: no value for {missing} of {len(df)} prompts: it reads "
                f"{ESTIMATORS[name].reads or 'what the input lacks'}"
            )


def _answer_lookup(answers: Any, data: Any, from_file: bool):
    """prompt -> the answer to rate (or None): `answers` by prompt id (a dict) or by input row
    (a sequence, data in memory: one per row). Checked here, before any work."""
    if answers is None:
        return lambda p: None
    if isinstance(answers, dict):
        given = {str(k): v for k, v in answers.items()}
        return lambda p: None if given.get(p.prompt_id) is None else str(given[p.prompt_id])
    if isinstance(answers, str) or not hasattr(answers, "__len__"):
        raise ScoreInputError(
            "answers= takes a dict {prompt id: answer} or one answer per "
            f"input row (a list), not {type(answers).__name__}"
        )
    if from_file:
        raise ScoreInputError(
            "answers= for a file: give a dict {prompt id: answer} (the rows "
            "of a file are matched by id)"
        )
    rows = len(data) if hasattr(data, "__len__") else None
    if rows is not None and len(answers) != rows:
        raise ScoreInputError(
            f"answers= has {len(answers)} answers for {rows} input rows; give "
            "one per row (None where there is none) or a dict by prompt id"
        )
    listed = list(answers)
    return lambda p: None if p.row is None or listed[p.row] is None else str(listed[p.row])


def _score_input(reader: InputChunks, request: ScoreRequest):
    """`score` of the input `reader` reads: its rows as a DataFrame with the attrs `score`
    documents."""
    out_path = request.out_path
    chunks = iter(reader)
    with _reading_errors(out_path):
        first = next(chunks)
    input_key = _input_key(reader, request)
    with (
        _work_root(request.work_dir, out_path) as (root, temporary),
        naming_a_full_disk(str(root), settings="--out / --work-dir"),
    ):
        store = ArtifactStore(root / input_key)
        # a second scorer of the same input in this folder waits, then finds it current
        with cell_lock(store.root):
            scored = _score_in_store(request, store, input_key, reader, first, chunks)
            if out_path is not None:  # while the parts' rows files exist (a temporary store)
                with naming_a_full_disk(str(out_path.parent), settings="--out"):
                    _write_outputs(scored, out_path)
    df, got = scored.df, scored.got
    reading = _warn_about_the_reading(df)
    # attrs hold plain records, not DataFrames: pandas compares attrs with == when it concatenates
    # (printing a wide frame does), which a DataFrame value cannot answer
    df.attrs.update(
        summary=_records(scored.uq_summary),
        quality_summary=_records(scored.quality_summary),
        summary_key=frame_key(df),
        reading_warnings=reading,
        store=None if temporary else str(store.root),
        task=request.task,
        skipped=[p.as_dict() for p in got.skipped],
        n_rows=got.n_rows,
        replaced_surrogates=sum(got.replaced_surrogates.values()),
        skipped_path=None if scored.listed is None else str(scored.listed),
    )
    return df


def _input_key(reader: InputChunks, request: ScoreRequest) -> str:
    """The key of the input's store, once its first chunk is read: what was read (a file: its
    hash before the read; the reader checks at the end that it read those bytes), how, for which
    task, and the code that reads it."""
    cell = request.cell
    return hashlib.sha256(
        json.dumps(
            {
                "file": reader.file_hash if request.from_file else _prompts_hash(reader.prompts),
                "format": reader.format,
                "task": request.task,
                "fields": request.fields.as_dict(),
                "version": SCORE_FORMAT_VERSION,
                **({"answers": request.answers_key} if request.answers_key else {}),
                # a plugin's reference kind turns the file's references into the dataset artifact
                **(
                    {"plugin_code": code}
                    if (code := plugin_code(cell.plugins, {cell.task.reference}))
                    else {}
                ),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:20]


@contextmanager
def _reading_errors(out_path: Path | None):
    """A file with no good row is one ScoreInputError; its problems are written next to --out."""
    try:
        yield
    except ScoreInputError as exc:
        problems = getattr(exc, "problems", None)
        if problems and out_path is not None:  # no good row: keep the list of what is wrong
            with _atomic(skipped_path(out_path)) as tmp:
                write_skipped(problems, tmp)
            raise ScoreInputError(
                f"{exc} (all {len(problems)} problems in {skipped_path(out_path)})"
            ) from None
        raise


def _finish_reading(reader: InputChunks, out_path: Path | None):
    """(what `reader` read, where the skipped rows are listed or None), after its last chunk;
    the skipped rows and replaced surrogates are warned of here."""
    with _reading_errors(out_path):
        got = reader.finish()
    listed = skipped_path(out_path) if out_path is not None and got.skipped else None
    if got.skipped:
        _warn(_skipped_message(got.skipped, got.n_rows, listed))
    if got.replaced_surrogates:
        rows = list(got.replaced_surrogates)
        shown = ", ".join(rows[:SHOWN_PROBLEMS]) + (" ..." if len(rows) > SHOWN_PROBLEMS else "")
        _warn(
            f"replaced {sum(got.replaced_surrogates.values())} lone surrogate(s) (\\ud800-\\udfff "
            f"escapes without their pair, as in truncated LLM output) by U+FFFD in {len(rows)} "
            f"row(s): {shown}"
        )
    return got, listed


@contextmanager
def _work_root(work_dir: str | Path | None, out_path: Path | None):
    """(the folder the artifact store goes under, whether it is a temporary one removed on exit):
    --work-dir, else OUT's name + ".work", else a temporary folder."""
    if work_dir is not None:
        yield Path(work_dir), False
    elif out_path is not None:
        summary = summary_paths(out_path)[0]
        root = summary.with_name(summary.name.replace(".summary.csv", ".work"))
        _probe_dir(root, f"the work directory of --out {out_path} (choose one with --work-dir)")
        yield root, False
    else:
        with tempfile.TemporaryDirectory(prefix="score-") as temp:
            yield Path(temp), True


@dataclass(frozen=True)
class ScoredInput:
    """An input scored in its store (`_score_in_store`)."""

    written: Any  # the rows as written: a DataFrame, or the PartRows of an input scored in parts
    df: Any  # the rows returned: Python objects, or the lean frame
    uq_summary: Any  # the PRR / AUC summary; None without references
    quality_summary: Any  # the mean quality per method and metric; None without references
    with_reference: set[str]  # the ids of the prompts with a reference
    got: ScoreInput  # what was read: the skipped rows, the rows read, the replaced surrogates
    listed: Path | None  # where the skipped rows are listed (next to --out), or None


def _score_in_store(
    request: ScoreRequest,
    store: ArtifactStore,
    input_key: str,
    reader: InputChunks,
    first: list[ScorePrompt],
    chunks,
) -> ScoredInput:
    """The input's artifacts written (where the store does not hold them, made here, already),
    the pipeline's stages run on them, the rows and summaries made.

    An input of one chunk (`first`: up to `part_prompts` rows or prompts, `InputChunks`) is one
    store. A larger one is scored in parts, a chunk each, each its own store under
    `part-NNNNN/` (a killed run resumes part by part), on every core
    (`pipeline.runtime.devices.cpu_threads()`: forked workers, a part each) while the next chunks are
    read; the PRR / AUC summary is computed once over all parts' quality and uncertainty, its
    bootstraps spread over the same workers. The rows and summaries are those of one store."""
    cell = request.cell
    space = cell.task.latent_space()
    with _reading_errors(request.out_path):
        second = next(chunks, None)
    if second is None:
        got, listed = _finish_reading(reader, request.out_path)
        frames, with_reference = _run_part(
            cell, store, input_key, first, request.source(reader.format), reader.format
        )
        written = output_frame(frames, with_reference, space)  # JSON columns: the file's form
        df = lean_frame(written) if request.lean else python_objects(written, frames, space)
        scored = ScoredInput(
            written, df, *summary_frames(frames), with_reference, got=got, listed=listed
        )
    else:
        all_chunks = itertools.chain([first, second], chunks)
        scored = _score_parts(request, store, input_key, reader, all_chunks, space)
    df = scored.df
    _warn_unparsed(df)
    _warn_missing_estimates(df, [e for e in cell.uq.estimators if e not in UQ_ESTIMATORS])
    missing_ref = len(df) - int(df["has_reference"].sum())
    if scored.with_reference and missing_ref:
        _warn(
            f"{missing_ref} of {len(df)} prompts have no reference: they get no quality and do "
            "not count in the PRR/AUC summary"
        )
    return scored


# Prompts per part of a large input: a part's frames stay ~150 MiB (M = 20), and parts are the
# unit of work the cores share and of resuming
PART_PROMPTS = 2000
_PARTS: dict[str, Any] = {}  # what a forked part worker inherits (no pickling of the input)


def _run_part(cell, store: ArtifactStore, key: str, prompts, source: str, fmt: str):
    """One store's input artifacts written (unless current and made here) and its stages run:
    (the frames, the ids of prompts with a reference)."""
    from pipeline.artifacts.stage import made_here

    dataset, samples, decodes, ptrue, with_reference = input_frames(
        prompts, cell.task.reference, cell.dataset.name
    )
    for name, frame in (
        ("dataset", dataset),
        ("samples", samples),
        ("decodes", decodes),
        ("ptrue", ptrue),
    ):
        if not (store.is_current(name, key) and made_here(cell, store, name)):
            store.write(
                name,
                frame,
                key=key,
                config={"source": source, "format": fmt, "task": cell.task.name},
                extra={"producer": SCORER_PRODUCER, "cell": cell.name},
            )
    return run_pipeline(store, cell, with_reference), with_reference


class PartResult(NamedTuple):
    """What a part worker hands back (`_part`): a part's rows and frames."""

    columns: list[str]  # the columns of its rows as written (its rows file holds them)
    df: Any  # its rows returned: Python objects, or the lean frame
    quality: Any  # its quality rows; None without references
    uncertainty: Any  # its uncertainty rows
    with_reference: set[str]  # the ids of its prompts with a reference


def _part(index: int):
    """Score part `index` of `_PARTS` in its own store (its rows as written go to its rows
    file); the part's own PRR / AUC are point values only (n_bootstrap 0: the intervals are
    computed over all parts)."""
    import pickle

    job = _PARTS
    # a part is chunk `index` of `size` rows (or prompts, `unit`) of the input
    store = ArtifactStore(_part_dir(job["store"], index))
    with (store.root / PART_INPUT).open("rb") as fh:
        prompts = pickle.load(fh)
    # and keyed by its own content: a part read while the file changed is never reused
    key = hashlib.sha256(
        f"{job['key']}/{index}/{job['size']}/{job['unit']}/{_prompts_hash(prompts)}".encode()
    ).hexdigest()[:20]
    frames, with_reference = _run_part(
        job["cell"], store, key, prompts, job["source"], job["format"]
    )
    written = output_frame(frames, with_reference, job["space"])
    df = lean_frame(written) if job["lean"] else python_objects(written, frames, job["space"])
    # the rows as written go to a file of the part, not back to the parent (which writes --out
    # from these files one part at a time): at 100k prompts they are ~250 MiB
    rows_path = store.root / PART_ROWS
    if job["keep_rows"]:
        _atomic_pickle(written, rows_path)
    return PartResult(
        list(written.columns), df, frames.get("quality"), frames["uncertainty"], with_reference
    )


def _part_dir(store: ArtifactStore, index: int) -> Path:
    """Part `index`'s own store folder inside the input's store."""
    return store.root / f"part-{index:05d}"


PART_ROWS = "rows.pkl"  # a part's rows as written (pickled: the same dtypes and objects)
PART_INPUT = "prompts.pkl"  # a part's input prompts, read by the worker that scores it


def _atomic_pickle(obj, path: Path) -> None:
    import pickle

    with _atomic(path) as tmp, tmp.open("wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)


@contextmanager
def _atomic(*paths: Path):
    """Temporary names for `paths` (beside each, hidden), renamed into place when the `with`
    body ends well, removed when it does not: a kill or a full disk while writing leaves the
    previous files whole (a reader never sees half a file)."""
    import os

    for path in paths:  # a killed run's leftovers (its pid is gone): nothing reads them
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            pid = stale.name[len(path.name) + 2 : -4]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                stale.unlink(missing_ok=True)
    temps = [p.with_name(f".{p.name}.{os.getpid()}.tmp") for p in paths]
    try:
        yield temps[0] if len(temps) == 1 else temps
        for tmp, path in zip(temps, paths):
            if tmp.exists():
                os.replace(tmp, path)
    finally:
        with signals_held():  # a stop here would leave the rest behind
            for tmp in temps:
                tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _column_order(column_lists: Sequence[Sequence[str]]) -> list[str]:
    """The columns of one store's rows from those of its parts: a column some part lacks (the
    white-box columns of a part without log-probs) goes where the parts that have it put it,
    after its nearest earlier column, not at the end as a plain concatenation would."""
    order: list[str] = []
    for columns in column_lists:
        for i, col in enumerate(columns):
            if col not in order:
                before = next((c for c in reversed(columns[:i]) if c in order), None)
                order.insert(0 if before is None else order.index(before) + 1, col)
    return order


class PartRows(list):
    """The rows as written of a scored-in-parts input: each part's pickled frame, in order, and
    the columns of all of them (in the order one concatenated frame would have)."""

    def __init__(self, paths: Sequence[Path], columns: Sequence[str]) -> None:
        super().__init__(paths)
        self.columns = list(columns)

    def frames(self):
        """Each part's rows with every column (None where a part has none), one at a time."""
        import pandas as pd

        for path in self:
            frame = pd.read_pickle(path)
            for col in self.columns:
                if col not in frame:
                    frame[col] = pd.Series([None] * len(frame), index=frame.index, dtype=object)
            yield frame[self.columns]


def _score_parts(
    request: ScoreRequest,
    store: ArtifactStore,
    key: str,
    reader: InputChunks,
    chunks,
    space,
) -> ScoredInput:
    """The parts of `_score_in_store`: each chunk of `chunks` goes to its part's folder and to a
    worker as it is read; the whole input's reading is finished (its checks) after the last,
    before the parts' results are gathered."""
    import pandas as pd

    # the evaluate stage's module imported before the fork: the workers inherit it
    import pipeline.stages.evaluate  # noqa: F401
    from pipeline.runtime.devices import forked_workers

    _PARTS.update(_part_job(request, store, key, reader, space))
    workers = forked_workers(sys.maxsize)  # at least two parts; the cores bound it
    with _part_pool(workers) as pool:
        futures, n_prompts = _submit_parts(pool, store, chunks)
        # the whole input's checks: duplicate ids, no good row, ...
        got, listed = _finish_reading(reader, request.out_path)
        log.info(
            "scoring %d prompts in %d parts of %d %s on %d worker(s)",
            n_prompts,
            len(futures),
            request.part_prompts,
            reader.unit,
            workers,
        )
        written, df, qualities, uncertainty, with_reference = _gather_parts(pool, futures, store)
        frames: dict[str, Any] = {"quality": None, "uq_scores": None}
        if with_reference and qualities:
            frames["quality"] = pd.concat(qualities, ignore_index=True)
            frames["uq_scores"] = _uq_scores_over_parts(
                request,
                store,
                len(futures),
                frames["quality"],
                uncertainty,
                map_fn=pool.map if pool is not None else map,
            )
    return ScoredInput(written, df, *summary_frames(frames), with_reference, got=got, listed=listed)


def _part_job(
    request: ScoreRequest, store: ArtifactStore, key: str, reader: InputChunks, space
) -> dict[str, Any]:
    """What every part of the input shares (`_PARTS`: a forked worker inherits it)."""
    import dataclasses

    cell = request.cell
    # a part's own PRR / AUC are point values: the intervals are computed over all parts
    part_cell = dataclasses.replace(
        cell, evaluation=dataclasses.replace(cell.evaluation, n_bootstrap=0)
    )
    return {
        "cell": part_cell,
        "store": store,
        "key": key,
        "source": request.source(reader.format),
        "format": reader.format,
        "size": request.part_prompts,
        "unit": reader.unit,
        "space": space,
        "keep_rows": request.out_path is not None,
        "lean": request.lean,
    }


@contextmanager
def _part_pool(workers: int):
    """The pool of `workers` forked part workers (None for one: the parts run here), shut down
    at the end; `_PARTS` is cleared then."""
    from pipeline.runtime.devices import forked_pool

    pool = forked_pool(workers) if workers > 1 else None
    try:
        yield pool
    except BaseException as exc:
        if pool is not None and not isinstance(exc, Exception):
            # a stop (SIGTERM, Ctrl-C): the parts in flight are dropped whole, now (their
            # artifacts are atomic; a rerun resumes part by part)
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                proc.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            pool = None  # nothing to wait for: the finally below must not block on it
        raise
    finally:
        try:
            if pool is not None:  # after an error: the parts not started yet are dropped
                pool.shutdown(cancel_futures=True)
        finally:
            _PARTS.clear()


def _submit_parts(pool, store: ArtifactStore, chunks) -> tuple[list, int]:
    """Each chunk of prompts to its part's folder and to a worker of `pool` as it is read (no
    pool: the part's index, scored here later): (the parts, the prompts in them)."""
    futures: list = []
    n_prompts = 0
    for prompts in chunks:
        if not prompts:  # a chunk of bad rows only
            continue
        # the part's prompts go to its folder; this process then drops them: it holds one
        # chunk at a time, its workers one part each
        index = len(futures)
        _part_dir(store, index).mkdir(parents=True, exist_ok=True)
        _atomic_pickle(prompts, _part_dir(store, index) / PART_INPUT)
        n_prompts += len(prompts)
        futures.append(pool.submit(_part, index) if pool is not None else index)
        del prompts
        check_stop()
    return futures, n_prompts


def _gather_parts(pool, futures: list, store: ArtifactStore):
    """The parts' results as one input's: (the rows as written (PartRows: each part's file),
    the rows returned, the parts' quality frames, the uncertainty rows, the ids with a
    reference). The parts' own frames are dropped on return."""
    import pandas as pd

    parts = [f.result() if pool is not None else _part(f) for f in futures]
    with_reference = set().union(*(p.with_reference for p in parts))
    columns = _column_order([p.columns for p in parts])
    written = PartRows([_part_dir(store, i) / PART_ROWS for i in range(len(parts))], columns)
    df = pd.concat([p.df for p in parts], ignore_index=True)
    df = df[[c for c in columns if c in df]]  # lean frames have fewer
    qualities = [p.quality for p in parts if p.quality is not None]
    uncertainty = pd.concat([p.uncertainty for p in parts], ignore_index=True)
    return written, df, qualities, uncertainty, with_reference


def _uq_scores_over_parts(
    request: ScoreRequest, store: ArtifactStore, n_parts: int, quality, uncertainty, map_fn
):
    """The PRR / AUC rows with their intervals over all parts (the bootstraps spread by
    `map_fn`), kept in the input's store: a rerun reads them (their key: every part's quality
    and uncertainty, the evaluation settings)."""
    from pipeline.components.parts import thaw
    from pipeline.stages.evaluate import UQScoring, estimator_scores

    ev = request.cell.evaluation
    scores_key = hashlib.sha256(
        json.dumps(
            [
                [
                    ArtifactStore(_part_dir(store, i)).key(name)
                    for i in range(n_parts)
                    for name in ("quality", "uncertainty")
                ],
                thaw(ev),
            ],
            sort_keys=True,
        ).encode()
    ).hexdigest()[:20]
    if store.is_current("uq_scores", scores_key):
        return store.read("uq_scores")
    scores = estimator_scores(quality, uncertainty, UQScoring.of(ev), map_fn)
    store.write(
        "uq_scores",
        scores,
        key=scores_key,
        config={"parts": n_parts, "part_prompts": request.part_prompts},
        extra={"producer": SCORER_PRODUCER},
    )
    return scores


def _warn_about_the_reading(df) -> dict[str, int] | None:
    """How answers were read ({warning: prompts}, None without the column), warned of once."""
    if "reading_warnings" not in df:
        return None
    from pipeline.evaluation.audit import count_warnings

    reading = count_warnings(w for w in df["reading_warnings"] if isinstance(w, list))
    if any(reading.values()):
        _warn(
            "how answers were read: "
            + ", ".join(f"{k} in {v} prompt(s)" for k, v in reading.items() if v)
            + " (columns reading_warnings and label_matches; --audit N prints prompts)"
        )
    return reading


def _write_outputs(scored: ScoredInput, out_path: Path) -> None:
    """The rows to --out, the summaries next to it, and the skipped rows' list (or no list):
    each written under a temporary name and all renamed once all are written, so a kill or a
    full disk leaves the previous run's files as they were."""
    summary_path, quality_path = summary_paths(out_path)
    with _atomic(out_path, summary_path, quality_path, skipped_path(out_path)) as (
        rows_tmp,
        summary_tmp,
        quality_tmp,
        skipped_tmp,
    ):
        write_output(scored.written, out_path, to=rows_tmp)
        if scored.uq_summary is not None:
            scored.uq_summary.to_csv(summary_tmp, index=False)
            scored.quality_summary.to_csv(quality_tmp, index=False)
        if scored.listed is not None:
            write_skipped(scored.got.skipped, skipped_tmp)
    if scored.listed is None:  # a list from an earlier run of a since-fixed file would mislead
        skipped_path(out_path).unlink(missing_ok=True)
    if scored.uq_summary is None:  # nor summaries of an earlier input with references
        for path in (summary_path, quality_path):
            path.unlink(missing_ok=True)


def _records(frame) -> list[dict] | None:
    return None if frame is None else frame.to_dict(orient="records")


def frame_key(df) -> str:
    """What a summary was computed over: the rows' prompt ids, risks and qualities."""
    cols = ["prompt_id", RISK_OF_OURS, *sorted(c for c in df.columns if c.startswith("quality_"))]
    payload = df[[c for c in cols if c in df]].to_json(orient="values", double_precision=15)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


RISK_OF_OURS = f"{METHOD_COLUMNS[OURS]}_risk"


def summaries(df, **evaluation: Any):
    """(UQ summary: PRR and AUC of the Bayes risk and the latent entropy against the Bayes
    answer's quality, mean quality per method and metric) of a scored frame as DataFrames, or
    (None, None) without references. Computed from the frame's columns, so a slice, a
    concatenation of scored frames or a frame read back from parquet gets its own summary; the
    one `score` computed (`df.attrs`) is reused while the rows are those it was computed over.
    `evaluation`: the evaluation settings (n_bootstrap, ci_alpha, seed, max_rejection, ties;
    default those `score` uses)."""
    import pandas as pd

    if (
        not evaluation
        and df.attrs.get("summary_key") == frame_key(df)
        and df.attrs.get("summary") is not None
    ):
        return tuple(pd.DataFrame(df.attrs[k]) for k in ("summary", "quality_summary"))
    return summary_frames(frames_from_columns(df), **evaluation)


def frames_from_columns(df) -> dict[str, Any]:
    """The quality and uncertainty rows `summary_frames` reads, rebuilt from a scored frame's
    columns (`quality_<method>_<metric>`, the risk and entropy columns); rows keyed by position
    (a concatenation may repeat prompt ids)."""
    import pandas as pd

    from pipeline.tasks.contract import METRICS

    ids = [str(i) for i in range(len(df))]
    quality = []
    for method, col in METHOD_COLUMNS.items():
        prefix = f"quality_{col}_"
        for column in (c for c in df.columns if c.startswith(prefix)):
            metric = column[len(prefix) :]
            if metric not in METRICS:
                continue
            values = pd.to_numeric(df[column], errors="coerce").to_numpy(float)
            quality += [
                {
                    "prompt_id": i,
                    "method": method,
                    "metric": metric,
                    "value": v,
                    "higher_is_better": METRICS[metric].higher_is_better,
                }
                for i, v in zip(ids, values)
                if v == v
            ]
    if not quality:
        return {"quality": None, "uq_scores": None}
    columns = {
        risk_estimator(OURS): RISK_OF_OURS,
        **{e: e for e in ENTROPY_COLUMNS},
        **{
            e: e
            for e in df.columns
            if e in ESTIMATORS and ESTIMATORS[e].decision is None and df[e].notna().any()
        },
    }
    uncertainty = [
        {"prompt_id": i, "estimator": est, "value": float(v)}
        for est, col in columns.items()
        if col in df
        for i, v in zip(ids, pd.to_numeric(df[col], errors="coerce"))
    ]
    return {
        "quality": pd.DataFrame(quality),
        "uncertainty": pd.DataFrame(uncertainty),
        "uq_scores": None,
    }


def _warn(message: str) -> None:
    warnings.warn(message, ScoreWarning, stacklevel=3)


def _warn_unparsed(df) -> None:
    empty = df.loc[df["n_parsed"] == 0, "prompt_id"].tolist()
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (" ..." if len(empty) > 10 else "")
        fate = (
            "they abstain: column abstention"
            if "n_no_answer" in df and bool((df.loc[df["n_parsed"] == 0, "n_no_answer"] > 0).all())
            else "risk NaN"
        )
        _warn(f"{len(empty)} prompt(s) with no parseable response (n_parsed=0; {fate}): {shown}")
