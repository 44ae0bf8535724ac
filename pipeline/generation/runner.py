"""Generate everything one set of prompts needs: samples, decoding baselines, P(True).

`generate_records` returns three DataFrames with exactly the columns of
`pipeline.artifacts.schema.SAMPLES`, `DECODES` and `PTRUE`. The stage (sharding, resume, manifests)
is built on top of it in `pipeline.stages.generate` (the cell's model and data: `pipeline.generation.cell`).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.artifacts.schema import DECODES, PTRUE, SAMPLES
from pipeline.generation.base import Generation, GenerationBackend, SamplingConfig
from pipeline.generation.ptrue import compute_ptrue, to_probability

log = logging.getLogger(__name__)

STRATEGIES = ("greedy", "beam", "contrastive", "ar")
# `ar` is one ancestral sample drawn with the sampling config but a seed no sample uses.
AR_SEED_OFFSET = 1_000_003


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> Any:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(columns))
    for name, kind in columns.items():
        if kind == "int":
            frame[name] = frame[name].astype("int64")
        elif kind == "float":
            frame[name] = frame[name].astype("float64")
    return frame


def _row(generation: Generation) -> dict[str, Any]:
    lps = [float(x) for x in generation.token_logprobs]
    # logprob is the Python sum of exactly the stored floats, so the identity holds bit for bit.
    return {
        "text": generation.text,
        "token_logprobs": lps,
        "logprob": float(sum(lps)),
        "finish_reason": generation.finish_reason or "",
    }


@dataclass(frozen=True)
class GenerationPlan:
    """What `generate_records` asks the backend for, chunk after chunk of prompts."""

    sampling: SamplingConfig
    ar_sampling: SamplingConfig  # the `ar` decode's: one sample, a seed no sample uses
    strategies: tuple[str, ...]  # the decodes, each once, in the order asked
    beam_width: int
    contrastive_alpha: float
    contrastive_top_k: int
    ptrue: bool
    ptrue_with_samples: bool  # P(True) with the samples in its prompt (PTrueSampling)


@dataclass
class _Records:
    """The rows generated so far, and their tokens (for the closing rate)."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    decodes: list[dict[str, Any]] = field(default_factory=list)
    ptrue: list[dict[str, Any]] = field(default_factory=list)
    n_tokens: int = 0

    def add_samples(self, ids: Sequence[str], samples: list[list[Generation]]) -> None:
        for pid, gens in zip(ids, samples):
            for j, g in enumerate(gens):
                self.samples.append({"prompt_id": pid, "sample_idx": j, **_row(g)})
                self.n_tokens += len(g.token_ids)

    def add_decodes(
        self, ids: Sequence[str], strategies: Sequence[str], decoded: dict[str, list[Generation]]
    ) -> None:
        for pos, pid in enumerate(ids):
            for strategy in strategies:  # in the order asked, whichever call made them
                g = decoded[strategy][pos]
                self.decodes.append({"prompt_id": pid, "strategy": strategy, **_row(g)})
                self.n_tokens += len(g.token_ids)

    def add_ptrue(self, ids: Sequence[str], logprobs: Sequence[float]) -> None:
        for pid, lp in zip(ids, logprobs):
            self.ptrue.append({"prompt_id": pid, "logprob_true": lp, "p_true": to_probability(lp)})

    def frames(self) -> tuple[Any, Any, Any]:
        return (
            _frame(self.samples, SAMPLES),
            _frame(self.decodes, DECODES),
            _frame(self.ptrue, PTRUE),
        )


# size: a public keyword API (the generate stage, the vLLM pass and the tests call it by these
# names); it packs the settings into a GenerationPlan that the per-chunk functions share
def generate_records(
    backend: GenerationBackend,
    prompts: Sequence[str],
    prompt_ids: Sequence[str],
    sampling: SamplingConfig,
    strategies: Sequence[str] = STRATEGIES,
    ptrue: bool = True,
    progress: Any = True,
    *,
    questions: Sequence[str] | None = None,
    beam_width: int = 5,
    contrastive_alpha: float = 0.6,
    contrastive_top_k: int = 4,
    ptrue_with_samples: bool = False,
    chunk_size: int | None = None,
) -> tuple[Any, Any, Any]:
    """Samples (sampling.n per prompt), decodes (`strategies`) and P(True) for chat-rendered prompts.

    `questions` are the texts P(True) asks about (lm-polygraph's input text); when omitted the
    prompts themselves are used. P(True) uses lm-polygraph's plain prompt (estimator `PTrue`);
    `ptrue_with_samples=True` switches to its sampling variant (`PTrueSampling`).
    `progress`: True, a bar of these prompts (pipeline.runtime.progress: log lines when stderr is no
    terminal) and a closing line; a `pipeline.runtime.progress.Progress` of the caller's (over several
    calls), updated per batch; False, none.
    Returns (samples_df, decodes_df, ptrue_df).
    """
    prompts, prompt_ids = list(prompts), [str(p) for p in prompt_ids]
    strategies = _checked_request(backend, prompts, prompt_ids, strategies, questions)
    # Prompts go to the backend 4 batches at a time: it samples them `batch_size` prompts per
    # call, while beam, contrastive and P(True) batch all of them (fewer rows per prompt).
    chunk = chunk_size or 4 * max(1, int(getattr(backend, "batch_size", 8)))
    plan = GenerationPlan(
        sampling=sampling,
        ar_sampling=dataclasses.replace(
            sampling,
            n=1,
            stream="ar",
            seed=None if sampling.seed is None else sampling.seed + AR_SEED_OFFSET,
        ),
        strategies=tuple(strategies),
        beam_width=beam_width,
        contrastive_alpha=contrastive_alpha,
        contrastive_top_k=contrastive_top_k,
        ptrue=ptrue,
        ptrue_with_samples=ptrue_with_samples,
    )
    records = _Records()
    started = time.perf_counter()
    bar = _bar(progress, backend, len(prompts))
    for start in range(0, len(prompts), chunk):
        batch = prompts[start : start + chunk]
        asked = None  # the texts P(True) asks about
        if plan.ptrue:
            asked = list(questions[start : start + chunk]) if questions is not None else batch
        _generate_chunk(backend, batch, prompt_ids[start : start + chunk], asked, plan, records)
        if bar is not None:
            bar.update(len(batch))
    if progress is True:
        bar.close()
    _say_rate(len(prompts), records.n_tokens, time.perf_counter() - started, progress is True)
    return records.frames()


def _checked_request(
    backend: GenerationBackend,
    prompts: list[str],
    prompt_ids: list[str],
    strategies: Sequence[str],
    questions: Sequence[str] | None,
) -> list[str]:
    """The strategies asked, each once, after checking that the request can run."""
    if len(prompts) != len(prompt_ids):
        raise ValueError(
            f"{len(prompts)} prompts but {len(prompt_ids)} prompt_ids; pass one id per prompt"
        )
    if len(set(prompt_ids)) != len(prompt_ids):
        raise ValueError("prompt_ids must be unique")
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown decoding strategies {unknown}; choose from {list(STRATEGIES)}")
    if questions is not None and len(questions) != len(prompts):
        raise ValueError(f"{len(questions)} questions but {len(prompts)} prompts")
    strategies = list(dict.fromkeys(strategies))
    if "contrastive" in strategies and not callable(getattr(backend, "contrastive", None)):
        raise ValueError(
            f"backend {getattr(backend, 'name', backend)} has no contrastive search; run that "
            "strategy with a backend that has it (the generate stage does so under vLLM)"
        )
    return strategies


def _bar(progress: Any, backend: GenerationBackend, total: int) -> Any:
    """The bar `generate_records` updates: its own (progress=True), the caller's, or None."""
    if progress is not True:
        return None if isinstance(progress, bool) else progress  # the caller's, left open
    # a bar on a terminal, else a log line every ~10 % or 30 s
    from pipeline.runtime.progress import progress as progress_bar

    return progress_bar(total, f"generate ({getattr(backend, 'name', 'backend')})", unit="prompt")


def _generate_chunk(
    backend: GenerationBackend,
    batch: list[str],
    ids: list[str],
    asked: list[str] | None,
    plan: GenerationPlan,
    records: _Records,
) -> None:
    """Samples, decodes and P(True) (about `asked`) of one chunk of prompts, into `records`."""
    samples, decoded = _sample(backend, batch, plan)
    records.add_samples(ids, samples)
    _decode(backend, batch, plan, decoded)
    records.add_decodes(ids, plan.strategies, decoded)
    if plan.ptrue:
        greedy = decoded.get("greedy") or backend.greedy(batch, plan.sampling.max_new_tokens)
        sample_texts = (
            [[g.text for g in gens] for gens in samples] if plan.ptrue_with_samples else None
        )
        records.add_ptrue(
            ids, compute_ptrue(backend, asked, [g.text for g in greedy], sample_texts)
        )


def _sample(
    backend: GenerationBackend, batch: list[str], plan: GenerationPlan
) -> tuple[list[list[Generation]], dict[str, list[Generation]]]:
    """The chunk's samples, and the decodes that rode in the sampling call (greedy, `ar`)."""
    sampling, strategies = plan.sampling, plan.strategies
    decoded: dict[str, list[Generation]] = {}
    if callable(getattr(backend, "sample_and_decode", None)):
        # greedy and `ar` as extra rows of the sampling call: one prefill per prompt
        want_greedy = "greedy" in strategies or plan.ptrue
        samples, greedy_rows, ar_rows = backend.sample_and_decode(
            batch,
            sampling,
            greedy=want_greedy,
            extra_seed=plan.ar_sampling.seed if "ar" in strategies else None,
        )
        if greedy_rows is not None:
            decoded["greedy"] = greedy_rows
        if ar_rows is not None:
            decoded["ar"] = ar_rows
    else:
        samples = backend.sample(batch, sampling)
    if len(samples) != len(batch) or any(len(s) != sampling.n for s in samples):
        raise RuntimeError(
            f"backend {backend.name} returned {[len(s) for s in samples]} samples, expected {sampling.n} per prompt"
        )
    return samples, decoded


def _decode(
    backend: GenerationBackend,
    batch: list[str],
    plan: GenerationPlan,
    decoded: dict[str, list[Generation]],
) -> None:
    """The chunk's decodes that the sampling call did not make, added to `decoded`."""
    max_new_tokens = plan.sampling.max_new_tokens
    for strategy in plan.strategies:
        if strategy in decoded:
            continue
        if strategy == "greedy":
            decoded[strategy] = backend.greedy(batch, max_new_tokens)
        elif strategy == "beam":
            decoded[strategy] = backend.beam(batch, plan.beam_width, max_new_tokens)
        elif strategy == "contrastive":
            decoded[strategy] = backend.contrastive(  # type: ignore[attr-defined]
                batch,
                max_new_tokens=max_new_tokens,
                alpha=plan.contrastive_alpha,
                top_k=plan.contrastive_top_k,
            )
        elif strategy == "ar":
            decoded[strategy] = [gens[0] for gens in backend.sample(batch, plan.ar_sampling)]


def _say_rate(n_prompts: int, n_tokens: int, seconds: float, aloud: bool) -> None:
    """The closing line: prompts and tokens per second (logged; printed too when `aloud`)."""
    rate = n_prompts / seconds if seconds > 0 else float("inf")
    token_rate = n_tokens / seconds if seconds > 0 else float("inf")
    summary = f"generated {n_prompts} prompts in {seconds:.1f} s: {rate:.2f} prompts/s, {token_rate:.1f} tokens/s"
    log.info(summary)
    if aloud:
        print(summary, file=sys.stderr)


def ptrue_of_answers(
    backend: GenerationBackend,
    prompt_ids: Sequence[str],
    questions: Sequence[str],
    answers: Sequence[str],
    known: Mapping[str, float] | None = None,
) -> Any:
    """P(True) (lm-polygraph's plain prompt) asked about `answers`, one per prompt: a DataFrame
    with the columns of `pipeline.artifacts.schema.PTRUE`, in the order of `prompt_ids`.

    `known`: {prompt_id: log p("True")} already computed for the same question and answer text
    (the greedy pass's, where the beam decode's text equals the greedy one's), taken as is and
    not asked again: the same prompt to the same model, so the same value, without the rounding
    a batch of other lengths would add.
    """
    prompt_ids = [str(p) for p in prompt_ids]
    if not len(prompt_ids) == len(questions) == len(answers):
        raise ValueError(
            f"{len(prompt_ids)} prompt_ids, {len(questions)} questions and "
            f"{len(answers)} answers: pass one of each per prompt"
        )
    known = {str(k): float(v) for k, v in (known or {}).items()}
    ask = [i for i, pid in enumerate(prompt_ids) if pid not in known]
    asked = compute_ptrue(backend, [questions[i] for i in ask], [answers[i] for i in ask])
    logprob = dict(known)
    logprob.update({prompt_ids[i]: lp for i, lp in zip(ask, asked, strict=True)})
    rows = [
        {"prompt_id": pid, "logprob_true": logprob[pid], "p_true": to_probability(logprob[pid])}
        for pid in prompt_ids
    ]
    return _frame(rows, PTRUE)


def decode_records(
    backend: Any,
    prompts: Sequence[str],
    prompt_ids: Sequence[str],
    strategies: Sequence[str],
    *,
    max_new_tokens: int,
    beam_width: int = 5,
    alpha: float = 0.6,
    top_k: int = 4,
) -> Any:
    """`decodes` rows of the deterministic strategies `strategies` (beam, contrastive, greedy)
    for chat-rendered prompts: per prompt, one row per strategy in the given order."""
    prompts = list(prompts)
    decoded: dict[str, list[Generation]] = {}
    for strategy in strategies:
        if strategy == "beam":
            decoded[strategy] = backend.beam(prompts, beam_width, max_new_tokens)
        elif strategy == "contrastive":
            decoded[strategy] = backend.contrastive(
                prompts, max_new_tokens=max_new_tokens, alpha=alpha, top_k=top_k
            )
        elif strategy == "greedy":
            decoded[strategy] = backend.greedy(prompts, max_new_tokens)
        else:
            raise ValueError(f"decode_records runs beam, contrastive and greedy, not {strategy!r}")
    rows = [
        {"prompt_id": str(pid), "strategy": s, **_row(decoded[s][i])}
        for i, pid in enumerate(prompt_ids)
        for s in strategies
    ]
    return _frame(rows, DECODES)
