#!/usr/bin/env python
"""Prepared check of the GPU code paths, on tiny random models built here (issue 58).

    python scripts/gpu_check.py --device cuda --out gpu_check.json   # on a GPU node (< 10 min)
    python scripts/gpu_check.py --device cpu --quick                 # smoke test (< 1 min)

Nothing is downloaded: every model is built from a small config with random weights by the
project's own builders (scripts/make_tiny_model.py, scripts/build_rehearsal_assets.py,
scripts/make_tiny_comet.py) into a temporary folder, then loaded by the project's real code:

- generation/<llama|qwen2>/<float32|bfloat16>: the transformers backend
  (pipeline/generation/hf_backend.py): `sample_and_decode` (the own decode loop, greedy and
  `ar` rows riding along), `greedy`, `beam` (both through `generate`), `contrastive` and
  `logprob_of_next`; shapes, finite raw log-probs <= 0, identical seeded samples on a rerun,
  weights on the requested device and dtype, tokens/s;
- nli_deberta: NliEquivalence (DeBERTa-v2 classifier) in float32 and half precision: pair
  matrices, probabilities, rerun, precision drift, pairs/s;
- embedder: Embedder on a sentence-transformers folder (tiny random BERT + mean pooling):
  unit rows, rerun, embeddings/s;
- cross_encoder: SAR/CoCoA's CrossEncoderSimilarity (sentence-transformers CrossEncoder on a
  one-label DeBERTa-v2): scores in [0, 1], rerun, pairs/s;
- comet: COMET's RegressionMetric through text_metrics.comet_scores (skipped, with the reason,
  where `comet` is not installed);
- config_paper: `experiment=paper` composed as the command line does; the device and the NLI
  precision it resolves to, and the judges aux_models builds from it (batch sizes, weights'
  device and dtype), with the hub models swapped for the tiny ones (where from, not what).

Every check is recorded as pass / fail / skip with its reason and numbers; an exception fails
that check only (its text is the reason) and the run goes on. The JSON (--out) is rewritten
after every check, so a run killed by a time limit keeps what it finished. Exit status: 1 when
any check failed, else 0. docs/gpu.md says how to run it and what it covers.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import platform
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"

for _name, _value in (
    ("HF_HUB_OFFLINE", "1"),
    ("HF_DATASETS_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("WANDB_MODE", "offline"),
):
    os.environ.setdefault(_name, _value)
if importlib.util.find_spec("pipeline") is None:  # run from a checkout without an install
    sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Sizes:
    prompts: int  # chat prompts per generation call
    samples: int  # M samples per prompt
    new_tokens: int
    batch_size: int  # prompts per sampling batch (the backend's batch_size)
    beams: int
    nli_texts: int  # answers per question: texts x (texts - 1) ordered pairs
    embed_texts: int
    ce_pairs: int
    comet_segments: int


QUICK = Sizes(
    prompts=3,
    samples=4,
    new_tokens=12,
    batch_size=2,
    beams=3,
    nli_texts=10,
    embed_texts=64,
    ce_pairs=48,
    comet_segments=8,
)
FULL = Sizes(
    prompts=16,
    samples=20,
    new_tokens=64,
    batch_size=4,
    beams=5,
    nli_texts=40,
    embed_texts=2048,
    ce_pairs=1024,
    comet_segments=256,
)

QUESTIONS = [
    "What is the capital of France?",
    "Name the primary colours.",
    "Which planet is closest to the sun? Answer with one word.",
    "Translate 'kiitos' to English.",
    "Who painted the Mona Lisa?",
    "Summarise: The river flooded the town after three days of rain, and the bridge closed.",
    "How many legs does a spider have?",
    "Which ocean is the largest?",
]
WORDS = [
    "the",
    "a",
    "capital",
    "city",
    "of",
    "france",
    "paris",
    "rome",
    "tokyo",
    "lima",
    "river",
    "ocean",
    "pacific",
    "atlantic",
    "planet",
    "mercury",
    "mars",
    "blue",
    "red",
    "yellow",
    "painted",
    "leonardo",
    "spider",
    "eight",
    "legs",
    "rain",
    "flood",
    "town",
    "bridge",
    "closed",
    "thank",
    "you",
    "good",
    "morning",
    "is",
    "was",
    "and",
    "in",
    "on",
    "largest",
    "closest",
]


class Skip(Exception):
    """A check that cannot run because a library is not installed."""

    def __init__(self, library: str, reason: str) -> None:
        super().__init__(reason)
        self.library = library


def _script(name: str) -> Any:
    """One of the project's scripts/ as a module (they are not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _need(library: str) -> None:
    if importlib.util.find_spec(library) is None:
        raise Skip(library, f"{library} is not installed")


def _texts(n: int, seed: int) -> list[str]:
    """n distinct short answer-like strings, the same for a seed."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        out[" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))] = None
    return list(out)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    text = " ".join(text.split())
    if len(text) > 600:
        text = text[:600] + " ..."
    lowered = text.lower()
    if "same device" in lowered or "device-side" in lowered or "expected all tensors" in lowered:
        text = "DEVICE MISMATCH: " + text
    return text


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in (
        "torch",
        "transformers",
        "tokenizers",
        "sentence-transformers",
        "unbabel-comet",
        "pytorch-lightning",
        "hydra-core",
        "numpy",
    ):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


# ------------------------------------------------------------------------------ run context


class Context:
    """Device, sizes, the work folder and the tiny models (built once, on first use)."""

    def __init__(
        self,
        device: str,
        sizes: Sizes,
        work: Path,
        requested: str = "auto",
        unavailable: str | None = None,
    ) -> None:
        import torch

        self.device = device  # resolved: cpu, cuda, cuda:N
        self.requested = requested  # as given: auto stays auto (experiment=paper's setting)
        self.cuda = device.startswith("cuda")
        self.sizes = sizes
        self.work = work
        # why the requested device cannot be used (None: it can)
        self.unavailable = unavailable
        self._assets: dict[str, Path] = {}
        self._failed: dict[str, str] = {}  # asset -> why its builder failed
        if unavailable:
            self.device_name = "unavailable"
        elif self.cuda:
            index = torch.device(device).index or 0
            self.device_name = torch.cuda.get_device_name(index)
        else:
            self.device_name = platform.processor() or platform.machine() or "cpu"

    @property
    def half_dtype(self) -> str:
        """The half precision `nli_dtype: auto` resolves to on this device (bfloat16 on CPU)."""
        from pipeline.runtime.devices import resolve_dtype

        return resolve_dtype("auto", self.device) if self.cuda else "bfloat16"

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def timed(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        self.sync()
        started = time.perf_counter()
        out = fn()
        self.sync()
        return out, max(time.perf_counter() - started, 1e-9)

    def asset(self, name: str) -> Path:
        """The tiny model `name`, built on first use (a builder's error is re-raised each time)."""
        if name not in self._assets and name not in self._failed:
            try:
                self._assets[name] = ASSET_BUILDERS[name](self.work)
            except Skip:
                raise
            except Exception as exc:  # noqa: BLE001 -- reported by every check that needs it
                self._failed[name] = _error_text(exc)
        if name in self._failed:
            raise RuntimeError(f"building the tiny {name} model failed: {self._failed[name]}")
        return self._assets[name]


# ------------------------------------------------------------------------------ tiny models


def build_llama(work: Path) -> Path:
    """scripts/make_tiny_model.py's Llama (hidden 128, head_dim 64), trained a few steps so
    that some samples end at EOS (rows leave the decode loop early)."""
    tiny = _script("make_tiny_model")
    out = work / "llama"
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny.build_tokenizer(out)
    tiny.build_model(out, tokenizer, train_steps=40, seed=0)
    return out


def build_qwen2(work: Path) -> Path:
    """The rehearsal's tiny Qwen2 (4 heads, head_dim 64, Qwen2.5's template and sampling
    defaults), one training step: random weights."""
    return _script("build_rehearsal_assets").build_tiny_qwen25(work / "qwen2", steps=1)


def build_nli(work: Path) -> Path:
    return _script("build_rehearsal_assets").build_tiny_nli(work)


def build_cross_encoder(work: Path) -> Path:
    _need("sentence_transformers")
    return _script("build_rehearsal_assets").build_tiny_nli(
        work, name="cross_encoder", labels={"LABEL_0": 0}
    )


def build_embedder(work: Path, seed: int = 0) -> Path:
    """A sentence-transformers folder: a tiny random BERT (WordPiece tokenizer trained here)
    and mean pooling."""
    _need("sentence_transformers")
    import torch
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    hf_dir, out = work / "bert", work / "embedder"
    hf_dir.mkdir(parents=True, exist_ok=True)
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(
        _texts(200, seed) + QUESTIONS, vocab_size=300, min_frequency=1, show_progress=False
    )
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, model_max_length=128)
    tokenizer.save_pretrained(hf_dir)
    torch.manual_seed(seed)
    BertModel(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            max_position_embeddings=128,
        )
    ).save_pretrained(hf_dir)
    word = models.Transformer(str(hf_dir), max_seq_length=128)
    pooling = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(out))
    return out


def build_comet(work: Path) -> Path:
    _need("comet")
    out = work / "comet"
    _script("make_tiny_comet").build_tiny_comet(out)
    return out


ASSET_BUILDERS: dict[str, Callable[[Path], Path]] = {
    "llama": build_llama,
    "qwen2": build_qwen2,
    "nli": build_nli,
    "cross_encoder": build_cross_encoder,
    "embedder": build_embedder,
    "comet": build_comet,
}


# ------------------------------------------------------------------------------ recording


class Recorder:
    """A check's numbers and problems; `step` turns an exception into a problem and goes on."""

    def __init__(self) -> None:
        self.numbers: dict[str, Any] = {}
        self.problems: list[str] = []
        self.tracebacks: list[str] = []

    def expect(self, ok: bool, message: str) -> bool:
        if not ok:
            self.problems.append(message)
        return bool(ok)

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        try:
            yield
        except Skip:
            raise
        except Exception as exc:  # noqa: BLE001 -- one failing step must not hide the others
            self.problems.append(f"{what}: {_error_text(exc)}")
            self.tracebacks.append(f"{what}:\n{traceback.format_exc(limit=12)}")

    def rate(self, key: str, amount: float, seconds: float) -> None:
        self.numbers[key] = round(amount / seconds, 2)


def _finite(values: Any) -> bool:
    import numpy as np

    arr = np.asarray(values, dtype=np.float64)
    return bool(np.isfinite(arr).all())


def _on(ctx: Context, module: Any) -> tuple[str, str]:
    """(device type, dtype) of a torch module's first parameter."""
    param = next(module.parameters())
    return param.device.type, str(param.dtype).replace("torch.", "")


def _expect_placed(
    rec: Recorder, ctx: Context, module: Any, what: str, dtype: str | None = None
) -> None:
    import torch

    device_type, param_dtype = _on(ctx, module)
    rec.numbers[f"{what}_weights"] = f"{device_type}/{param_dtype}"
    rec.expect(
        device_type == torch.device(ctx.device).type,
        f"{what}: weights on {device_type}, expected {ctx.device}",
    )
    if dtype is not None:
        rec.expect(param_dtype == dtype, f"{what}: weights in {param_dtype}, expected {dtype}")


# ------------------------------------------------------------------------------ checks


def _check_generations(
    rec: Recorder, what: str, gens: list, max_new: int, eos_ids: set[int]
) -> int:
    """Shape and log-prob checks of a flat list of Generations; returns the generated tokens."""
    tokens = 0
    for i, g in enumerate(gens):
        n = len(g.token_ids)
        tokens += n
        if not rec.expect(1 <= n <= max_new, f"{what}[{i}]: {n} tokens (1..{max_new})"):
            return tokens
        if not rec.expect(
            len(g.token_logprobs) == n,
            f"{what}[{i}]: {len(g.token_logprobs)} log-probs for {n} tokens",
        ):
            return tokens
        if not rec.expect(_finite(g.token_logprobs), f"{what}[{i}]: non-finite log-probs"):
            return tokens
        if not rec.expect(
            max(g.token_logprobs) <= 1e-3, f"{what}[{i}]: log-prob {max(g.token_logprobs):.4g} > 0"
        ):
            return tokens
        rec.expect(
            not any(t in eos_ids for t in g.token_ids[:-1]), f"{what}[{i}]: tokens after EOS"
        )
    return tokens


def check_generation(ctx: Context, rec: Recorder, family: str, dtype: str) -> None:
    import torch

    from pipeline.generation.base import get_backend

    s = ctx.sizes
    path = ctx.asset(family)
    backend = get_backend(
        "transformers",
        model_path=str(path),
        dtype=dtype,
        device=ctx.device,
        batch_size=s.batch_size,
    )
    try:
        _exercise_backend(ctx, rec, backend, dtype)
        if ctx.cuda:
            rec.numbers["max_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    finally:
        del backend
        if ctx.cuda:
            torch.cuda.empty_cache()


def _exercise_backend(ctx: Context, rec: Recorder, backend: Any, dtype: str) -> None:
    """The backend's decoding paths, each a step of its own (one failing does not hide the
    others)."""
    from pipeline.generation.base import SamplingConfig

    s = ctx.sizes
    _expect_placed(rec, ctx, backend.model, "model", dtype)
    rec.numbers["own_loop"] = bool(backend._own_loop)
    rec.expect(backend._own_loop, "the backend does not run its own decode loop for this model")
    rec.numbers["attn_implementation"] = backend.model.config._attn_implementation
    rec.numbers["fused_ops"] = list(backend.fused_ops)
    prompts = [
        backend.render_chat(
            [
                {
                    "role": "user",
                    "content": QUESTIONS[i % len(QUESTIONS)]
                    + ("" if i < len(QUESTIONS) else f" ({i})"),
                }
            ]
        )
        for i in range(s.prompts)
    ]
    cfg = SamplingConfig(n=s.samples, max_new_tokens=s.new_tokens, seed=0)
    rec.numbers["sampling"] = dict(
        zip(("temperature", "top_k", "top_p"), backend.resolve_sampling(cfg))
    )
    eos = set(backend.eos_ids)

    with rec.step("sample_and_decode"):
        first, _ = ctx.timed(
            lambda: backend.sample_and_decode(prompts, cfg, greedy=True, extra_seed=1)
        )
        (samples, greedy_rows, extra), seconds = ctx.timed(
            lambda: backend.sample_and_decode(prompts, cfg, greedy=True, extra_seed=1)
        )
        rec.expect(
            len(samples) == s.prompts and all(len(x) == s.samples for x in samples),
            f"samples: shape {[len(x) for x in samples]}, expected {s.prompts} x {s.samples}",
        )
        rec.expect(
            len(greedy_rows) == len(extra) == s.prompts, "greedy / ar rows: one per prompt expected"
        )
        flat = [g for row in samples for g in row]
        tokens = _check_generations(rec, "sample", flat + greedy_rows + extra, s.new_tokens, eos)
        rec.rate("sample_tokens_per_s", tokens, seconds)
        rec.numbers["sample_rows"] = len(flat) + 2 * s.prompts
        rec.numbers["eos_share"] = round(
            sum(bool(g.token_ids) and g.token_ids[-1] in eos for g in flat) / len(flat), 3
        )
        same = [
            a.token_ids == b.token_ids
            for a, b in zip(
                [g for row in first[0] for g in row] + first[1] + first[2],
                flat + greedy_rows + extra,
            )
        ]
        rec.numbers["rerun_identical_share"] = round(sum(same) / len(same), 4)
        rec.expect(all(same), f"seeded rerun: {len(same) - sum(same)} of {len(same)} rows differ")
        distinct = len({tuple(g.token_ids) for g in samples[0]})
        rec.numbers["distinct_samples_prompt0"] = distinct
        if dtype == "float32":  # batching must not change float32 samples (module docstring)
            backend.batch_size = 1
            try:
                single = backend.sample(prompts, cfg)
            finally:
                backend.batch_size = s.batch_size
            pairs = [
                (a.token_ids == b.token_ids)
                for ra, rb in zip(single, samples)
                for a, b in zip(ra, rb)
            ]
            # informative: different batch shapes may pick other kernels on a GPU
            rec.numbers["batch_size_1_identical_share"] = round(sum(pairs) / len(pairs), 4)

    for name, decode in (
        ("greedy", lambda: backend.greedy(prompts, s.new_tokens)),
        ("beam", lambda: backend.beam(prompts, s.beams, s.new_tokens)),
    ):
        with rec.step(f"{name} (generate)"):  # twice: the rerun must be the same
            first, _ = ctx.timed(decode)
            again, seconds = ctx.timed(decode)
            rec.expect(len(again) == s.prompts, f"{name}: {len(again)} outputs")
            tokens = _check_generations(rec, name, again, s.new_tokens, eos)
            rec.rate(f"{name}_tokens_per_s", tokens, seconds)
            rec.expect(
                [g.token_ids for g in first] == [g.token_ids for g in again],
                f"{name}: rerun differs",
            )

    with rec.step("contrastive"):
        out, seconds = ctx.timed(lambda: backend.contrastive(prompts, s.new_tokens))
        rec.expect(len(out) == s.prompts, f"contrastive: {len(out)} outputs")
        tokens = _check_generations(rec, "contrastive", out, s.new_tokens, eos)
        rec.rate("contrastive_tokens_per_s", tokens, seconds)

    with rec.step("logprob_of_next (P(True))"):
        lps = backend.logprob_of_next(prompts, "True")
        rec.expect(
            len(lps) == s.prompts and _finite(lps) and max(lps) <= 1e-3, f"logprob_of_next: {lps}"
        )


def check_nli(ctx: Context, rec: Recorder) -> None:
    import numpy as np

    from pipeline.mapping.equivalence import NliEquivalence

    folder = str(ctx.asset("nli"))
    texts = _texts(ctx.sizes.nli_texts, seed=1)
    question = QUESTIONS[0]
    n = len(texts)
    batch = 64 if ctx.cuda else 16  # what aux_models gives the judge
    entail_by_dtype = {}
    for dtype in ("float32", ctx.half_dtype):
        with rec.step(f"nli {dtype}"):
            first = NliEquivalence(folder, device=ctx.device, dtype=dtype, batch_size=batch)
            entail_a, _ = first.pair_probs(question, texts)
            judge = NliEquivalence(folder, device=ctx.device, dtype=dtype, batch_size=batch)
            judge._load()
            (entail, contra), seconds = ctx.timed(lambda j=judge: j.pair_probs(question, texts))
            _expect_placed(rec, ctx, judge._model, f"nli_{dtype}", dtype)
            rec.expect(
                entail.shape == contra.shape == (n, n),
                f"{dtype}: matrices {entail.shape}, expected ({n}, {n})",
            )
            rec.expect(
                judge.n_pairs_scored == n * (n - 1),
                f"{dtype}: {judge.n_pairs_scored} pairs scored, expected {n * (n - 1)}",
            )
            ok = _finite(entail) and _finite(contra)
            rec.expect(ok, f"{dtype}: non-finite probabilities")
            if ok:
                rec.expect(
                    bool(
                        (entail >= 0).all()
                        and (contra >= 0).all()
                        and (entail + contra <= 1 + 1e-6).all()
                    ),
                    f"{dtype}: probabilities outside [0, 1]",
                )
            rec.expect(np.array_equal(entail, entail_a), f"{dtype}: rerun differs")
            rec.rate(f"{dtype}_pairs_per_s", judge.n_pairs_scored, seconds)
            entail_by_dtype[dtype] = entail
    if len(entail_by_dtype) == 2:
        drift = float(np.abs(entail_by_dtype["float32"] - entail_by_dtype[ctx.half_dtype]).max())
        rec.numbers["half_vs_float32_max_abs"] = round(drift, 5)
        # EquivalenceConfig.nli_dtype: half precision moves probabilities within 0.05
        rec.expect(drift <= 0.05, f"{ctx.half_dtype} vs float32: entailment differs by {drift:.3g}")


def check_embedder(ctx: Context, rec: Recorder) -> None:
    import numpy as np

    from pipeline.mapping.embed import Embedder

    folder = str(ctx.asset("embedder"))
    texts = _texts(ctx.sizes.embed_texts, seed=2)
    first = Embedder(folder, device=ctx.device).embed(texts)
    embedder = Embedder(folder, device=ctx.device)
    backend = embedder._load()
    vectors, seconds = ctx.timed(lambda: embedder.embed(texts))
    _expect_placed(rec, ctx, backend, "embedder", "float32")
    rec.expect(
        vectors.shape[0] == len(texts) and vectors.ndim == 2 and vectors.shape[1] > 0,
        f"embeddings: shape {vectors.shape}",
    )
    rec.expect(vectors.dtype == np.float32, f"embeddings: dtype {vectors.dtype}")
    if rec.expect(_finite(vectors), "embeddings: non-finite values"):
        norms = np.linalg.norm(vectors, axis=1)
        rec.expect(bool(np.allclose(norms, 1.0, atol=1e-4)), "embeddings: rows not unit norm")
        rec.expect(len({v.tobytes() for v in vectors}) > 1, "embeddings: all rows equal")
    diff = float(np.abs(first - vectors).max())
    rec.numbers["rerun_max_abs"] = diff
    rec.expect(diff <= 1e-5, f"embeddings: rerun differs by {diff:.3g}")
    rec.numbers["dim"] = int(vectors.shape[1])
    rec.rate("embeddings_per_s", len(texts), seconds)


def check_cross_encoder(ctx: Context, rec: Recorder) -> None:
    import numpy as np

    from pipeline.uncertainty.cross_encoder import CrossEncoderSimilarity

    folder = str(ctx.asset("cross_encoder"))
    texts = _texts(ctx.sizes.ce_pairs + 1, seed=3)
    pairs = list(itertools.pairwise(texts))
    batch = 64 if ctx.cuda else 16  # what aux_models gives it
    first = CrossEncoderSimilarity(folder, device=ctx.device, batch_size=batch).score_pairs(pairs)
    scorer = CrossEncoderSimilarity(folder, device=ctx.device, batch_size=batch)
    model = scorer._load()
    scores, seconds = ctx.timed(lambda: scorer.score_pairs(pairs))
    _expect_placed(rec, ctx, model.model, "cross_encoder", "float32")
    rec.expect(scores.shape == (len(pairs),), f"scores: shape {scores.shape}")
    if rec.expect(_finite(scores), "scores: non-finite"):
        rec.expect(bool(((scores >= 0) & (scores <= 1)).all()), "scores outside [0, 1]")
    diff = float(np.abs(first - scores).max())
    rec.numbers["rerun_max_abs"] = diff
    rec.expect(diff <= 1e-5, f"scores: rerun differs by {diff:.3g}")
    rec.rate("pairs_per_s", len(pairs), seconds)


def check_comet(ctx: Context, rec: Recorder) -> None:
    import logging

    import torch

    from pipeline.evaluation.text_metrics import comet_scores, load_comet_model
    from pipeline.runtime.devices import comet_gpus

    folder = str(ctx.asset("comet"))
    n = ctx.sizes.comet_segments
    sources, hypotheses, references = _texts(n, 4), _texts(n, 5), _texts(n, 6)
    gpus = comet_gpus(ctx.device)
    rec.numbers["gpus"] = gpus
    if ctx.cuda and (index := torch.device(ctx.device).index):
        rec.numbers["note"] = (
            f"COMET runs on Lightning's first visible GPU, not {ctx.device} (index {index})"
        )
    logging.getLogger("comet").setLevel(logging.WARNING)
    first = comet_scores(sources, hypotheses, references, model=folder, gpus=gpus)
    scores, seconds = ctx.timed(
        lambda: comet_scores(sources, hypotheses, references, model=folder, gpus=gpus)
    )
    rec.expect(len(scores) == n, f"comet: {len(scores)} scores for {n} segments")
    rec.expect(_finite(scores), "comet: non-finite scores")
    diff = max(abs(a - b) for a, b in zip(first, scores))
    rec.numbers["rerun_max_abs"] = diff
    rec.expect(diff <= 1e-5, f"comet: rerun differs by {diff:.3g}")
    device_type, dtype = _on(ctx, load_comet_model(folder))
    rec.numbers["model_after_predict"] = f"{device_type}/{dtype}"
    rec.rate("segments_per_s", n, seconds)


def _compose_paper(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.config import register_configs
    from pipeline.runtime.resources import conf_dir

    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            return compose("config", overrides=["experiment=paper", *overrides])
    finally:
        GlobalHydra.instance().clear()


def check_config_paper(ctx: Context, rec: Recorder) -> None:
    """experiment=paper's device and precision settings, and what aux_models builds from them."""
    _need("hydra")
    import torch

    from pipeline.aux_models import factories as aux_models
    from pipeline.mapping.equivalence import NliEquivalence
    from pipeline.runtime.devices import comet_gpus, resolve_device, resolve_dtype

    auto = resolve_device("auto")
    rec.numbers["auto_resolves_to"] = auto
    rec.expect(
        auto == ("cuda" if torch.cuda.is_available() else "cpu"),
        f"device=auto resolves to {auto!r}, torch.cuda.is_available()={torch.cuda.is_available()}",
    )
    base = [
        f"cache_dir='{ctx.work / 'cache'}'",
        f"output_root='{ctx.work / 'outputs'}'",
        "wandb.enabled=false",
    ]
    if ctx.requested != "auto":
        base.append(f"device='{ctx.requested}'")
    paper = _compose_paper(base)
    eq = paper.task.equivalence
    rec.numbers["paper"] = {
        "device": str(paper.device),
        "nli_model": str(eq.nli_model),
        "nli_dtype": str(eq.nli_dtype),
        "equivalence_backend": str(eq.backend),
        "cross_encoder": str(paper.uq.groups.lm_polygraph.cross_encoder),
        "similarity": str(paper.uq.groups.lm_polygraph.similarity),
        "embedder": str(paper.mappers.sphere.embedder),
        "backend": str(paper.backend.name),
        "model_dtype": str(paper.model.dtype),
        "transformers_batch_size": int(paper.generation.transformers_batch_size),
    }
    device = resolve_device(str(paper.device))
    rec.numbers["device"] = device
    rec.expect(
        device == ctx.device,
        f"cfg.device={paper.device} resolves to {device!r}, expected {ctx.device!r}",
    )
    # experiment=paper pins float32 (lm-polygraph 0.5.0's DeBERTa); `auto` would pick half on a GPU
    want = "float32"
    got = resolve_dtype(str(eq.nli_dtype), device)
    rec.numbers["nli_dtype_resolved"] = got
    rec.expect(eq.backend == "nli", f"task.equivalence.backend={eq.backend}, the paper uses nli")
    rec.expect(
        got == want, f"nli_dtype={eq.nli_dtype} resolves to {got} on {device}, expected {want}"
    )
    batch = 64 if ctx.cuda else 16
    rec.numbers["comet_gpus"] = comet_gpus(device)
    rec.expect(
        comet_gpus(device) == int(ctx.cuda), f"comet_gpus({device!r}) = {comet_gpus(device)}"
    )

    # The same settings with the hub models swapped for the tiny ones (where from, not what).
    where = {"task.equivalence.nli_model": ctx.asset("nli")}
    have_st = importlib.util.find_spec("sentence_transformers") is not None
    if have_st:
        where["uq.groups.lm_polygraph.cross_encoder"] = ctx.asset("cross_encoder")
        where["mappers.sphere.embedder"] = ctx.asset("embedder")
    else:
        rec.numbers["not_checked"] = "cross encoder and embedder: sentence_transformers missing"
    cfg = _compose_paper(base + [f"{k}='{v}'" for k, v in where.items()])
    texts = _texts(4, seed=7)

    with rec.step("equivalence judge"):
        judge = aux_models.equivalence_judge(cfg.task.equivalence, cfg.device, cfg.cache_dir)
        rec.expect(isinstance(judge, NliEquivalence), f"judge is {type(judge).__name__}")
        rec.numbers["nli_judge"] = {
            "device": judge.device,
            "dtype": judge.dtype,
            "batch_size": judge.batch_size,
        }
        rec.expect(judge.device == device, f"NLI judge on {judge.device}, expected {device}")
        rec.expect(judge.dtype == want, f"NLI judge in {judge.dtype}, expected {want}")
        rec.expect(judge.batch_size == batch, f"NLI batch {judge.batch_size}, expected {batch}")
        entail, contra = judge.pair_probs(QUESTIONS[0], texts)
        rec.expect(_finite(entail) and _finite(contra), "NLI judge: non-finite probabilities")
        _expect_placed(rec, ctx, judge._model, "nli_judge", want)

    if have_st:
        with rec.step("cross encoder"):
            ce = aux_models.cross_encoder(cfg.uq.groups.lm_polygraph.cross_encoder, cfg.device)
            rec.numbers["cross_encoder_batch_size"] = ce.batch_size
            rec.expect(ce.device == device, f"cross encoder on {ce.device}, expected {device}")
            rec.expect(
                ce.batch_size == batch, f"cross encoder batch {ce.batch_size}, expected {batch}"
            )
            scores = ce.score_pairs(list(itertools.pairwise(texts)))
            rec.expect(_finite(scores), "cross encoder: non-finite scores")
            _expect_placed(rec, ctx, ce._load().model, "cross_encoder")

        with rec.step("embedder"):
            emb = aux_models.build_embedder(str(cfg.mappers.sphere.embedder), device=cfg.device)
            rec.expect(emb.device == device, f"embedder on {emb.device}, expected {device}")
            rec.expect(_finite(emb.embed(texts)), "embedder: non-finite vectors")
            _expect_placed(rec, ctx, emb._load(), "embedder")


def check_environment(ctx: Context, rec: Recorder) -> None:
    import torch

    rec.numbers["cuda_available"] = torch.cuda.is_available()
    rec.numbers["torch_cuda"] = torch.version.cuda
    rec.numbers["cpu_threads"] = torch.get_num_threads()
    if torch.cuda.is_available():
        rec.numbers["gpus"] = [
            torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
        ]
        rec.numbers["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
        rec.numbers["bf16_supported"] = torch.cuda.is_bf16_supported()
        rec.numbers["cudnn"] = torch.backends.cudnn.version()
    if not rec.expect(ctx.unavailable is None, str(ctx.unavailable)):
        return
    if ctx.cuda:
        x = torch.randn(256, 256, device=ctx.device)
        rec.expect(_finite((x @ x).sum().item()), "a matmul on the GPU is not finite")


CHECKS: list[tuple[str, Callable[..., None]]] = [
    ("environment", check_environment),
    *[
        (f"generation/{family}/{dtype}", partial(check_generation, family=family, dtype=dtype))
        for family in ("llama", "qwen2")
        for dtype in ("float32", "bfloat16")
    ],
    ("nli_deberta", check_nli),
    ("embedder", check_embedder),
    ("cross_encoder", check_cross_encoder),
    ("comet", check_comet),
    ("config_paper", check_config_paper),
]


# ------------------------------------------------------------------------------ main


def run_check(
    name: str, fn: Callable[[Context, Recorder], None], ctx: Context, versions: dict
) -> dict[str, Any]:
    import torch

    rec = Recorder()
    if ctx.cuda and not ctx.unavailable:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    status, reason, missing = "pass", "", None
    try:
        fn(ctx, rec)
    except Skip as skip:
        status, reason, missing = "skip", str(skip), skip.library
    except Exception as exc:  # noqa: BLE001 -- recorded; the other checks still run
        rec.problems.append(_error_text(exc))
        rec.tracebacks.append(traceback.format_exc(limit=12))
    if status != "skip" and rec.problems:
        status, reason = "fail", "; ".join(rec.problems)
    result = {
        "name": name,
        "status": status,
        "reason": reason,
        "seconds": round(time.perf_counter() - started, 3),
        "numbers": rec.numbers,
        "device": ctx.device,
        "device_name": ctx.device_name,
        "torch": versions.get("torch"),
        "transformers": versions.get("transformers"),
    }
    if missing:
        result["missing_library"] = missing
    if rec.tracebacks:
        result["tracebacks"] = rec.tracebacks
    return result


def _headline(numbers: dict[str, Any]) -> str:
    parts = [
        f"{k.removesuffix('_per_s').replace('_', ' ')} {v:,.0f}/s"
        for k, v in numbers.items()
        if k.endswith("_per_s")
    ]
    return ", ".join(parts)


def print_table(report: dict[str, Any]) -> None:
    rows = report["checks"]
    width = max(len(r["name"]) for r in rows)
    print(
        f"\n{report['device']} ({report['device_name']}), torch {report['versions']['torch']}, "
        f"transformers {report['versions']['transformers']}"
    )
    print(f"{'check':<{width}}  status  secs  throughput / reason")
    for r in rows:
        detail = _headline(r["numbers"]) if r["status"] == "pass" else r["reason"]
        if len(detail) > 160:
            detail = detail[:157] + "..."
        print(f"{r['name']:<{width}}  {r['status']:<6}  {r['seconds']:>5.1f}  {detail}")
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skip")}
    print(
        f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
        f"in {report['wall_s']:.1f} s"
    )


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device",
        default="auto",
        help="cuda, cuda:N, cpu or auto (cuda when visible); default auto",
    )
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small workloads (the default on cpu)")
    size.add_argument(
        "--full", action="store_true", help="GPU-sized workloads (the default on cuda)"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run the checks whose name contains this (repeatable)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="build the tiny models here (default: a temporary folder, removed)",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    import torch

    from pipeline.runtime.devices import resolve_device

    device = resolve_device(args.device)
    sizes = FULL if args.full or (device.startswith("cuda") and not args.quick) else QUICK
    versions = _versions()
    names = [name for name, _ in CHECKS]
    selected = [n for n in names if not args.only or any(o in n for o in args.only)]
    if not selected:
        parser.error(f"--only matches none of {names}")

    report: dict[str, Any] = {
        "device": device,
        "requested_device": args.device,
        "device_name": None,
        "sizes": sizes.__dict__,
        "versions": versions,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "wall_s": 0.0,
        "checks": [],
    }
    unavailable = None
    if device.startswith("cuda") and not torch.cuda.is_available():
        unavailable = (
            f"device {device} requested but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})"
        )
    elif device.startswith("cuda"):
        index = torch.device(device).index or 0
        if index >= torch.cuda.device_count():
            unavailable = f"device {device} requested, {torch.cuda.device_count()} GPU(s) visible"

    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ctx = Context(device, sizes, work, args.device, unavailable)
        report["device_name"] = ctx.device_name
        print(
            f"gpu_check: {device} ({ctx.device_name}), "
            f"sizes {'full' if sizes is FULL else 'quick'}, {len(selected)} checks",
            flush=True,
        )
        for name, fn in CHECKS:
            if name not in selected:
                continue
            if unavailable and name != "environment":
                result = {
                    "name": name,
                    "status": "fail",
                    "reason": f"not run: {unavailable}",
                    "seconds": 0.0,
                    "numbers": {},
                    "device": device,
                    "device_name": "unavailable",
                    "torch": versions.get("torch"),
                    "transformers": versions.get("transformers"),
                }
            else:
                print(f"  {name} ...", flush=True)
                result = run_check(name, fn, ctx, versions)
            print(
                f"  {name}: {result['status']} ({result['seconds']:.1f} s)"
                + (f" {result['reason']}" if result["reason"] else ""),
                flush=True,
            )
            report["checks"].append(result)
            report["wall_s"] = round(time.perf_counter() - started, 2)
            _write(args.out, report)
    report["wall_s"] = round(time.perf_counter() - started, 2)
    _write(args.out, report)
    print_table(report)
    print(f"results written to {args.out}")
    return 1 if any(r["status"] == "fail" for r in report["checks"]) else 0


if __name__ == "__main__":
    sys.exit(main())
