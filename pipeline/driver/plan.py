"""`python -m pipeline experiment=paper stage=plan`: what a sweep would launch, before any
cluster hour is spent.

For every cell of the sweep (the experiment's `hydra.sweeper.params`, composed like the jobs
will be): its GPUs and tensor parallel size, prompt and sample counts, the NLI pairs and
LLM-extraction calls it needs (counted exactly, with the hits already in the on-disk caches,
once the cell's samples exist; upper bounds before), which inputs are missing, and an estimated
wall time: the counts divided by throughputs (`Rates`), per cell and for the sweep. With `-m`,
each job prints its own cell's line instead. Below the table: what each cell reads from the hub
at an unpinned revision (model.revision / dataset.revision null, and the auxiliary checkpoints'
revision settings null; docs/revisions.md).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.artifacts.store import ArtifactStore
from pipeline.aux_models.factories import build_equivalence
from pipeline.clients.llm_client import build_llm_client
from pipeline.driver.assets import Asset, cell_assets
from pipeline.generation.cell import (
    dataset_hub_repo,
    dataset_options,
    model_revision,
    served,
    tensor_parallel_size,
)
from pipeline.mapping.equivalence import PairCache
from pipeline.mapping.extractor import EXTRACTIONS
from pipeline.runtime.errors import ConfigError
from pipeline.runtime.revisions import is_hub_id
from pipeline.tasks.contract import MAPPERS

if TYPE_CHECKING:  # the resolved cell (pipeline.config)
    from pipeline.config import Cell

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class Count:
    """A count column: what the table shows and the work it leaves to do (per prompt while the
    prompts are unknown)."""

    text: str = "-"
    left: int = 0
    per_prompt: bool = False

    def total(self, prompts: int) -> int:
        return self.left * prompts if self.per_prompt else self.left


@dataclass
class CellPlan:
    cell: str
    gpus: int
    tensor_parallel: int | None
    prompts: int | None = None
    samples: int | None = None
    nli_pairs: Count = field(default_factory=Count)
    llm_calls: Count = field(default_factory=Count)
    missing: list[str] = field(default_factory=list)
    note: str = ""
    hours: float | None = None  # estimated wall time (`estimate_hours`)
    rates: str = ""  # which `Rates` it used
    unpinned: list[str] = field(default_factory=list)  # hub repos read at revision null


@dataclass(frozen=True)
class Rates:
    """Throughputs a cell's counts are divided by. `generated_tokens_per_s_at_1b`: tokens per
    second of one GPU (or this CPU) for a model of one billion active parameters; decoding
    cost grows with the parameters read per token, so a model of P billion gets 1/P of it."""

    name: str
    generated_tokens_per_s_at_1b: float
    nli_pairs_per_s: float
    llm_calls_per_s: float
    embedded_strings_per_s: float
    measured: bool


RATES = {
    # Estimates, not measurements: no GPU was lent to the sessions that built this. vLLM on an
    # H100 decodes ~15-20k tokens/s for a 4B model at a few hundred concurrent rows; DeBERTa-large
    # MNLI in bf16 ~2k pairs/s; a hosted gpt-4.1-mini at 64 in flight and ~1 s per call ~40
    # calls/s after rate limits; EmbeddingGemma ~2k strings/s.
    "gpu": Rates("H100 (estimate)", 60_000.0, 2_000.0, 40.0, 2_000.0, measured=False),
    # The 2-core CPU of the CI machine, measured where it can be: `make reproduce` (SmolLM2-135M
    # float32, every strategy) generates 217-267 of the upper-bound tokens per second on the short-
    # prompt datasets, 138 on CNN/DM (x 0.135B = ~29 at 1B); MiniLM embeds ~160 SAR strings/s of
    # ~50 tokens (fewer when the input is long); the LLM queue ~345 calls/s against a loopback
    # server (scripts/bench_paper_scale.py; a hosted API is slower). DeBERTa-large NLI cannot run
    # here (no weights): ~5 pairs/s is an estimate.
    "cpu": Rates("2-core CPU (measured, NLI estimated)", 29.0, 5.0, 345.0, 160.0, measured=True),
}


def _rates(cell: Cell) -> Rates:
    on_gpu = cell.backend.name == "vllm" or (
        int(cell.model.gpus) > 0 and str(cell.backend.device) != "cpu"
    )
    return RATES["gpu" if on_gpu else "cpu"]


def estimate_hours(cell: Cell, plan: CellPlan, prompts: int | None = None) -> float | None:
    """Estimated wall time of a cell in hours: generated tokens (every row of every strategy at
    its full budget: an upper bound) at the model's rate, NLI pairs and LLM calls still to make,
    and SAR's strings (one per generated token of a sample), each at its `Rates` throughput.
    `prompts` stands in for the cell's prompts while they are unknown (its `dataset.limit`).
    None when neither is known."""
    n_prompts = plan.prompts if plan.prompts is not None else prompts
    if n_prompts is None:
        return None
    rates = _rates(cell)
    plan.rates = rates.name
    g = cell.generation
    strategies = set(g.strategies)
    rows = int(g.n_samples) + len(strategies & {"greedy", "ar"})
    rows += int(g.beam_width) * ("beam" in strategies)
    rows += int(g.contrastive_top_k) * ("contrastive" in strategies)
    tokens = n_prompts * rows * int(cell.dataset.max_new_tokens)
    seconds = 0.0
    params = cell.model.active_params_billions
    if params:
        seconds += tokens * float(params) / rates.generated_tokens_per_s_at_1b
    seconds += plan.nli_pairs.total(n_prompts) / rates.nli_pairs_per_s
    seconds += plan.llm_calls.total(n_prompts) / rates.llm_calls_per_s
    if "sar" in set(cell.uq.estimators):
        seconds += (
            n_prompts
            * int(g.n_samples)
            * int(cell.dataset.max_new_tokens)
            / rates.embedded_strings_per_s
        )
    return seconds / 3600.0


def _clusters_responses(cell: Cell) -> bool:
    return MAPPERS[cell.task.mapper].clusters_responses


def _uses_nli(cell: Cell) -> bool:
    semantic = {"semantic_entropy", "kle"}
    return cell.task.equivalence.backend == "nli" and (
        bool(semantic & set(cell.uq.estimators)) or _clusters_responses(cell)
    )


def _texts_per_prompt(cell: Cell, store) -> dict[str, tuple[str, list[str], list[str]]] | None:
    """prompt_id -> (question, sample texts, decode texts) when the cell's generations exist."""
    if store.manifest("samples") is None or store.manifest("decodes") is None:
        return None
    dataset, samples, decodes = (store.read(n) for n in ("dataset", "samples", "decodes"))
    by_s = samples.sort_values("sample_idx").groupby("prompt_id")["text"].apply(list).to_dict()
    by_d = decodes.groupby("prompt_id")["text"].apply(list).to_dict()
    return {
        r.prompt_id: (r.question, by_s.get(r.prompt_id, []), by_d.get(r.prompt_id, []))
        for r in dataset.itertuples()
    }


def _nli_count(cell: Cell, texts, n_prompts: int | None) -> Count:
    if not _uses_nli(cell):
        return Count()
    m = int(cell.generation.n_samples)
    d = len(set(cell.generation.strategies))
    whole = _clusters_responses(cell)
    per = (m + d) * (m + d - 1) if whole else m * (m - 1)
    if texts is None:
        if n_prompts is None:
            return Count(f"<= {per}/prompt", per, per_prompt=True)
        return Count(
            f"<= {per * n_prompts}" + ("" if whole else " (+ label merging)"), per * n_prompts
        )

    # the judge's cache name as the cells would build it on this machine (its precision: auto
    # is the GPU's if any); nothing is loaded
    judge = build_equivalence(cell).name
    keys = set()
    for question, samples, decodes in texts.values():
        unique = list(dict.fromkeys(samples + (decodes if whole else [])))
        keys.update(PairCache.key(judge, question, a, b) for a in unique for b in unique if a != b)
    hits = len(PairCache(Path(cell.cache_dir) / "pairs").get_many(sorted(keys)))
    return Count(f"{len(keys)} ({hits} cached)", len(keys) - hits)


def _llm_count(cell: Cell, texts, n_prompts: int | None) -> Count:
    ex, extraction = cell.task.extractor, MAPPERS[cell.task.mapper].extraction
    if ex.kind != "llm" or extraction is None:
        return Count()
    extraction = EXTRACTIONS[extraction]  # registered by the task beside its mapper
    per = int(cell.generation.n_samples) + len(set(cell.generation.strategies))
    if extraction.prompt is None:  # its own prompts (KGGen: entities + relations, then clustering)
        calls, label = extraction.calls * per, extraction.label
        if n_prompts is None:
            return Count(f"~{calls}/prompt ({label})", calls, per_prompt=True)
        return Count(f"~{calls * n_prompts} ({label})", calls * n_prompts)
    if texts is None:
        if n_prompts is None:
            return Count(f"<= {per}/prompt", per, per_prompt=True)
        return Count(f"<= {per * n_prompts}", per * n_prompts)

    client = build_llm_client(ex, cell.cache_dir)
    prompts = {
        extraction.prompt(q, t) for q, samples, decodes in texts.values() for t in samples + decodes
    }
    hits = sum(client.is_cached([{"role": "user", "content": p}]) for p in prompts)
    return Count(f"{len(prompts)} ({hits} cached)", len(prompts) - hits)


# cell_assets entries that are no model or checkpoint (or, for the model, named apart)
_NOT_CHECKPOINTS = ("weights of ", "data of ", "API key", "vLLM environment", "KGGen environment")


def unpinned_sources(cell: Cell, assets: list[Asset] | None = None) -> list[str]:
    """What the cell reads from the hub at no pinned revision: its model (model.revision null),
    its hub dataset (dataset.revision null) and every auxiliary hub checkpoint it loads whose
    revision setting is null (the NLI model, embedder, cross-encoder, COMET, AlignScore's base;
    named with that setting, or "no revision setting" where none exists)."""
    out = []
    if not served(cell) and is_hub_id(str(cell.model.path)) and model_revision(cell) is None:
        out.append(f"model {cell.model.path} (model.revision)")
    try:
        repo = dataset_hub_repo(cell)
    except (ConfigError, KeyError, TypeError, ValueError):  # an unknown dataset: reported apart
        repo = None
    if repo and dataset_options(cell).get("revision") is None:
        out.append(f"dataset {repo} (dataset.revision)")
    for a in cell_assets(cell) if assets is None else assets:
        if (
            not a.library
            and not a.what.startswith(_NOT_CHECKPOINTS)
            and is_hub_id(a.source)
            and "@" not in a.source
        ):  # repo@revision: pinned
            out.append(f"{a.what} {a.source} ({a.pin or 'no revision setting'})")
    return list(dict.fromkeys(out))


def cell_plan(cell: Cell) -> CellPlan:
    vllm = cell.backend.name == "vllm"
    plan = CellPlan(
        f"{cell.model.name}/{cell.dataset.name}",
        int(cell.model.gpus),
        tensor_parallel_size(cell.model) if vllm else None,
    )
    assets = cell_assets(cell)
    plan.missing = [f"{a.what} ({a.source}) -> {a.how}" for a in assets if not a.available]
    plan.unpinned = unpinned_sources(cell, assets)
    store = ArtifactStore(cell.root)
    texts = _texts_per_prompt(cell, store)
    if texts is not None:
        plan.prompts = len(texts)
    else:
        try:
            from pipeline.generation.cell import load_cell_dataset

            plan.prompts = len(load_cell_dataset(cell))
        except Exception as exc:  # the plan reports what it cannot count, it does not stop
            plan.note = f"prompts unknown: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    if plan.prompts is not None:
        plan.samples = plan.prompts * int(cell.generation.n_samples)
    plan.nli_pairs = _nli_count(cell, texts, plan.prompts)
    plan.llm_calls = _llm_count(cell, texts, plan.prompts)
    limit = cell.dataset.limit
    plan.hours = estimate_hours(cell, plan, prompts=int(limit) if limit else None)
    if plan.prompts is None and plan.hours is not None:
        plan.note += f" (hours for dataset.limit={limit} prompts)"
    return plan


def sweep_overrides() -> list[list[str]]:
    """The per-job overrides of the sweep this command would launch with -m."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hc = HydraConfig.get()
    # the config folders given on the command line: the cells' configs may come from them
    searchpath = [o for o in hc.overrides.hydra if o.startswith("hydra.searchpath=")]
    base = [*searchpath, *(o for o in hc.overrides.task if not o.startswith("stage="))]
    params = dict(hc.sweeper.params or {})
    parser = OverridesParser.create()
    for override in parser.parse_overrides(base):  # the command line wins over the config's sweep
        if override.is_sweep_override():
            params[override.get_key_element()] = ",".join(override.sweep_string_iterator())
        else:
            params.pop(override.get_key_element(), None)
    base = [o for o, p in zip(base, parser.parse_overrides(base)) if not p.is_sweep_override()]
    keys = list(params)
    choices = [str(params[k]).split(",") for k in keys]
    return [
        base + [f"{k}={v.strip()}" for k, v in zip(keys, combo)]
        for combo in itertools.product(*choices)
    ]


def _row(p: CellPlan) -> str:
    fmt = lambda v: "?" if v is None else str(v)  # noqa: E731
    missing = "; ".join(p.missing) if p.missing else "none"
    return (
        f"| {p.cell} | {p.gpus} | {fmt(p.tensor_parallel) if p.tensor_parallel else '-'} | "
        f"{fmt(p.prompts)} | {fmt(p.samples)} | {p.nli_pairs.text} | {p.llm_calls.text} | "
        f"{_hours(p.hours)} | {missing} |" + (f" {p.note}" if p.note else "")
    )


def _hours(hours: float | None) -> str:
    if hours is None:
        return "?"
    return f"{hours:.2f}" if hours < 10 else f"{hours:.0f}"


HEADER = (
    "| cell | GPUs | TP | prompts | samples | NLI pairs | LLM calls | est. hours | "
    "missing inputs |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
)


def print_plan(cell: Cell) -> list[CellPlan]:
    """The plan of `cell`, or (outside a multirun) of every cell of the sweep the command would
    launch with -m, each composed, checked and resolved as its job would be."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from pipeline.config import resolve_cell, validate

    def resolved(overrides: list[str]) -> Cell:
        composed = compose("config", overrides=[*overrides, "stage=plan"])
        validate(composed)
        return resolve_cell(composed)

    if HydraConfig.get().mode == RunMode.MULTIRUN:
        plans = [cell_plan(cell)]
    else:
        plans = [cell_plan(resolved(o)) for o in sweep_overrides()]
    lines = [HEADER, *(_row(p) for p in plans)]
    gpu_jobs = sum(p.gpus for p in plans)
    lines.append(
        f"{len(plans)} cell(s), {gpu_jobs} GPUs booked in total, "
        f"{sum(1 for p in plans if p.missing)} cell(s) with missing inputs "
        f"(fetch with `make paper-assets`, or see each line)."
    )
    known = [p for p in plans if p.hours is not None]
    if known:
        used = sorted({p.rates for p in known})
        gpu_hours = sum(p.hours * max(1, p.gpus) for p in known)
        lines.append(
            f"Estimated wall time: {_hours(sum(p.hours for p in known))} h in all, one cell after "
            f"another ({_hours(gpu_hours)} GPU-hours booked; the longest cell "
            f"{_hours(max(p.hours for p in known))} h), at the rates of {', '.join(used)} "
            "(pipeline.driver.plan.RATES: generation at its full token budget, an upper bound; "
            "estimates where not measured)."
        )
    lines += unpinned_lines(plans)
    print("\n".join(lines), flush=True)
    return plans


def unpinned_lines(plans: list[CellPlan]) -> list[str]:
    """One line per cell that reads a hub repository at an unpinned revision (its latest commit
    at load time; the commit used is recorded in the stages' manifests), or one line saying
    there is none."""
    cells = [p for p in plans if p.unpinned]
    if not cells:
        return [
            (
                "Unpinned hub revisions: none (every hub model and dataset is pinned, or the "
                "cells read bundled and local sources only)."
            )
        ]
    return [
        (
            f"Unpinned hub revisions in {len(cells)} of {len(plans)} cell(s) (revision null: "
            "the latest commit when loaded; pin with the setting named in brackets, "
            "docs/revisions.md):"
        ),
        *(f"- {p.cell}: {', '.join(p.unpinned)}" for p in cells),
    ]
