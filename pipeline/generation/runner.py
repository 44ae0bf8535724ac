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

    # Prompts go to the backend 4 batches at a time: it samples them `batch_size` prompts per
    # call, while beam, contrastive and P(True) batch all of them (fewer rows per prompt).
    chunk = chunk_size or 4 * max(1, int(getattr(backend, "batch_size", 8)))
    ar_sampling = dataclasses.replace(
        sampling,
        n=1,
        stream="ar",
        seed=None if sampling.seed is None else sampling.seed + AR_SEED_OFFSET,
    )
    sample_rows: list[dict[str, Any]] = []
    decode_rows: list[dict[str, Any]] = []
    ptrue_rows: list[dict[str, Any]] = []
    n_tokens = 0
    started = time.perf_counter()

    bar = None if isinstance(progress, bool) else progress  # the caller's, left open
    if progress is True:  # a bar on a terminal, else a log line every ~10 % or 30 s
        from pipeline.runtime.progress import progress as progress_bar

        bar = progress_bar(
            len(prompts), f"generate ({getattr(backend, 'name', 'backend')})", unit="prompt"
        )
    for start in range(0, len(prompts), chunk):
        batch = prompts[start : start + chunk]
        ids = prompt_ids[start : start + chunk]
        decoded: dict[str, list[Generation]] = {}
        if callable(getattr(backend, "sample_and_decode", None)):
            # greedy and `ar` as extra rows of the sampling call: one prefill per prompt
            want_greedy = "greedy" in strategies or ptrue
            samples, greedy_rows, ar_rows = backend.sample_and_decode(
                batch,
                sampling,
                greedy=want_greedy,
                extra_seed=ar_sampling.seed if "ar" in strategies else None,
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
        for pid, gens in zip(ids, samples):
            for j, g in enumerate(gens):
                sample_rows.append({"prompt_id": pid, "sample_idx": j, **_row(g)})
                n_tokens += len(g.token_ids)

        for strategy in strategies:
            if strategy in decoded:
                continue
            if strategy == "greedy":
                decoded[strategy] = backend.greedy(batch, sampling.max_new_tokens)
            elif strategy == "beam":
                decoded[strategy] = backend.beam(batch, beam_width, sampling.max_new_tokens)
            elif strategy == "contrastive":
                decoded[strategy] = backend.contrastive(  # type: ignore[attr-defined]
                    batch,
                    max_new_tokens=sampling.max_new_tokens,
                    alpha=contrastive_alpha,
                    top_k=contrastive_top_k,
                )
            elif strategy == "ar":
                decoded[strategy] = [gens[0] for gens in backend.sample(batch, ar_sampling)]
        for pos, pid in enumerate(ids):
            for strategy in strategies:  # in the order asked, whichever call made them
                g = decoded[strategy][pos]
                decode_rows.append({"prompt_id": pid, "strategy": strategy, **_row(g)})
                n_tokens += len(g.token_ids)

        if ptrue:
            greedy = decoded.get("greedy") or backend.greedy(batch, sampling.max_new_tokens)
            asked = list(questions[start : start + chunk]) if questions is not None else batch
            sample_texts = (
                [[g.text for g in gens] for gens in samples] if ptrue_with_samples else None
            )
            logprobs = compute_ptrue(backend, asked, [g.text for g in greedy], sample_texts)
            for pid, lp in zip(ids, logprobs):
                ptrue_rows.append(
                    {"prompt_id": pid, "logprob_true": lp, "p_true": to_probability(lp)}
                )
        if bar is not None:
            bar.update(len(batch))
    if progress is True:
        bar.close()

    seconds = time.perf_counter() - started
    rate = len(prompts) / seconds if seconds > 0 else float("inf")
    token_rate = n_tokens / seconds if seconds > 0 else float("inf")
    summary = f"generated {len(prompts)} prompts in {seconds:.1f} s: {rate:.2f} prompts/s, {token_rate:.1f} tokens/s"
    log.info(summary)
    if progress is True:
        print(summary, file=sys.stderr)
    return _frame(sample_rows, SAMPLES), _frame(decode_rows, DECODES), _frame(ptrue_rows, PTRUE)


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
