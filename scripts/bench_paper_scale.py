"""Paper-scale costs on synthetic data of the paper's shapes (issue 25), before/after.

NLI pairs per TriviaQA-shaped prompt at the map stage: M = 20 samples + 4 decodes, their distinct
answers in K semantic classes (K drawn per prompt: 1-8, mode share 30-95 %). "before" is the full
matrix of ordered pairs of distinct answers that the map stage scored (prefetch of U (U - 1)
pairs), "after" what the batched greedy clustering reads (`Equivalence.cluster_many`: each answer
against the first members it is compared with, both directions). The relation is the hidden
class (a stand-in with no model: the counts depend only on the decisions). Also the clustering's
own CPU time per prompt (bookkeeping, no model). l_Sample for answer sets at M = 1000 (pairwise
matrix vs the O(M K) identity vs the closed form). The decide stage's latent maths for a
MAQA-shaped cell, one prompt at a time vs the cell at once. LLM extraction requests per second
through the mappers' queue at 64 in flight against a 100 ms loopback server, as a share of the
ideal.

    python scripts/bench_paper_scale.py [--prompts 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.mapping.equivalence import CONTRA, ENTAIL, Equivalence


class HiddenClassEquivalence(Equivalence):
    """Entailment iff two answers share their hidden class (no model)."""

    def __init__(self, classes: dict[tuple[str, str], int]) -> None:
        super().__init__(strict=True)
        self.classes = classes

    @property
    def name(self) -> str:
        return "hidden-class"

    def _score(self, question, pairs):
        same = [self.classes[(question, a)] == self.classes[(question, b)] for a, b in pairs]
        return np.array([[ENTAIL if s else CONTRA] for s in same], dtype=float)

    def _matrices(self, values):
        labels = values[..., 0].astype(np.int64)
        return (labels == ENTAIL).astype(float), (labels == CONTRA).astype(float), labels


def triviaqa_shaped(rng: np.random.Generator, n_prompts: int, m: int = 20, decodes: int = 4):
    """(items, classes): per prompt M + decodes texts; every text is a distinct string (free-form
    answers rarely repeat verbatim under sampling), its class drawn from a skewed distribution."""
    items, classes = [], {}
    for p in range(n_prompts):
        q = f"q{p}"
        k = int(rng.integers(1, 9))
        mode = float(rng.uniform(0.3, 0.95))
        probs = np.array([mode] + [(1 - mode) / max(1, k - 1)] * (k - 1))[:k]
        probs /= probs.sum()
        texts = []
        for j in range(m + decodes):
            text = f"{q}-answer-{j}"
            classes[(q, text)] = int(rng.choice(k, p=probs))
            texts.append(text)
        items.append((q, texts))
    return items, classes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    items, classes = triviaqa_shaped(np.random.default_rng(args.seed), args.prompts)

    before = sum(len(set(t)) * (len(set(t)) - 1) for _, t in items)
    eq = HiddenClassEquivalence(classes)
    t0 = time.perf_counter()
    eq.cluster_many(items)
    seconds = time.perf_counter() - t0
    after = eq.n_pairs_scored
    n = len(items)
    print(
        f"NLI pairs per TriviaQA-shaped prompt at map (M=20 + 4 decodes, {n} prompts): "
        f"before {before / n:.1f}, after {after / n:.1f}, ratio {after / before:.3f} "
        f"(goal <= 0.25)"
    )
    print(
        f"clustering bookkeeping (no model): {1e3 * seconds / n:.2f} ms per prompt, "
        f"{1e6 * seconds / max(1, after):.1f} us per pair scored"
    )
    nli_input_prep(items[:50])
    sample_mbr_sets(n_prompts=200, m=1000, k=30, seed=args.seed)
    decide_cell(n_prompts=args.prompts, m=20, seed=args.seed)
    for m, n in ((20, 2000), (100, 1000), (1000, 100)):
        decide_from_label_sets(n_prompts=n, m=m, seed=args.seed)
    llm_queue(n_prompts=64, responses=20, in_flight=64, latency=0.1)


def nli_input_prep(items: list) -> None:
    """CPU time to turn a prompt's ordered pairs into NLI model inputs (length check, question
    cut, padded batch), no model: the tokenizer on every pair twice (before) vs each text
    tokenized once and joined by the pair template (after). SmolLM2's byte-level BPE tokenizer
    (DeBERTa-large-MNLI's family; it ships here) on TriviaQA-shaped texts."""
    from transformers import AutoTokenizer

    from pipeline.generation.smollm2 import ensure_dense_model
    from pipeline.mapping.equivalence import NliEquivalence

    tokenizer = AutoTokenizer.from_pretrained(str(ensure_dense_model(None)))
    tokenizer.pad_token = tokenizer.eos_token
    question = "Which Lloyd Webber musical premiered in the US on 10th December 1993?"
    triples = [
        (question, a, b)
        for _, texts in items
        for a in dict.fromkeys(texts)
        for b in dict.fromkeys(texts)
        if a != b
    ]
    seconds = {}
    for label, once in (("before", False), ("after", True)):
        judge = NliEquivalence(model="unused", max_length=512, batch_size=64)
        judge._use_tokenizer(tokenizer)
        judge._model = "none: inputs only"  # pair_texts loads nothing then
        if not once:
            judge._backend = None  # the tokenizer on every pair, as before
        t0 = time.perf_counter()
        judge._encodings = {} if once else None
        texts = [judge.pair_texts(q, a, b) for q, a, b in triples]
        for start in range(0, len(texts), 64):
            judge._batch(texts[start : start + 64])
        seconds[label] = time.perf_counter() - t0
    per = {k: 1e3 * v / len(triples) for k, v in seconds.items()}
    print(
        f"NLI input prep (no model, {len(triples)} pairs of {len(items)} prompts): before "
        f"{per['before']:.3f} ms per pair, after {per['after']:.3f} ms per pair, "
        f"{per['before'] / per['after']:.1f}x"
    )


def llm_queue(n_prompts: int, responses: int, in_flight: int, latency: float) -> None:
    """Extraction calls of a cell through the mappers' queue (one pool over all prompts) against
    the loopback OpenAI-compatible stand-in, in its own process (its own interpreter lock),
    answering after `latency` seconds."""
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from pipeline.clients.llm_client import LLMClient
    from pipeline.mapping.extractor import extraction_prompt

    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        server = subprocess.Popen(
            [
                sys.executable,
                str(here / "openai_stand_in.py"),
                "--port-file",
                str(port_file),
                "--delay",
                str(latency),
            ],
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(here.parent)},
        )
        try:
            for _ in range(600):
                if port_file.exists():
                    break
                time.sleep(0.05)
            client = LLMClient(
                model="rule-server",
                base_url=f"http://127.0.0.1:{port_file.read_text()}/v1",
                cache_dir=Path(tmp) / "cache",
                max_workers=in_flight,
            )
            prompts = [
                extraction_prompt(
                    "answer_set",
                    f"Which oceans border country {p}?",
                    f"The Atlantic and Pacific ({p}, {r}).",
                )
                for p in range(n_prompts)
                for r in range(responses)
            ]
            client.complete(prompts[:in_flight])  # connections opened, imports done
            t0 = time.perf_counter()
            client.complete(prompts[in_flight:])
            seconds = time.perf_counter() - t0
        finally:
            server.terminate()
            server.wait()
    ideal = in_flight / latency
    rate = (len(prompts) - in_flight) / seconds
    print(
        f"LLM extraction queue ({n_prompts} prompts x {responses} responses, {in_flight} in "
        f"flight, {1e3 * latency:.0f} ms server in its own process): {rate:.0f} req/s of an "
        f"ideal {ideal:.0f} = {rate / ideal:.2f} (goal >= 0.9)"
    )


def pairwise_risks(x: np.ndarray) -> np.ndarray:
    """The pairwise l_Sample every MBR toolkit computes (an M x M distance matrix per prompt;
    the package's implementation before issue 25), for comparison."""
    out = np.empty(x.shape[:2])
    for p in range(x.shape[0]):
        xf = x[p].astype(np.float64)
        sizes = xf.sum(axis=1)
        dist = sizes[:, None] + sizes[None, :] - 2.0 * (xf @ xf.T)
        out[p] = dist.sum(axis=0) / x.shape[1]
    return out


def sample_mbr_sets(n_prompts: int, m: int, k: int, seed: int) -> None:
    """l_Sample for answer sets at M samples: pairwise vs the O(M K) identity vs the closed-form
    Bayes action, on random incidence arrays (K labels, each in a random share of samples)."""
    from pipeline.latent import sets_bayes_batch, sets_pairwise_risks_batch

    rng = np.random.default_rng(seed)
    x = rng.random((n_prompts, m, k)) < rng.uniform(0.05, 0.95, size=(n_prompts, 1, k))
    t0 = time.perf_counter()
    before = pairwise_risks(x)
    t_pair = time.perf_counter() - t0
    t0 = time.perf_counter()
    after = sets_pairwise_risks_batch(x)
    t_new = time.perf_counter() - t0
    t0 = time.perf_counter()
    sets_bayes_batch(x)
    t_bayes = time.perf_counter() - t0
    assert np.array_equal(before, after), "the two l_Sample computations disagree"
    per = 1e4 / n_prompts  # per 10k prompts
    print(
        f"l_Sample, sets, M={m}, K={k} ({n_prompts} prompts, per 10k prompts): pairwise "
        f"{per * t_pair:.1f} s, O(M K) {per * t_new:.2f} s ({t_pair / t_new:.0f}x; goal >= 10x), "
        f"closed-form Bayes {per * t_bayes:.2f} s ({t_pair / t_bayes:.0f}x the pairwise)"
    )
    t_mbrs = mbrs_sample_mbr(x, after)
    if t_mbrs is None:
        print("  mbrs: not importable here (pip install mbrs==0.1.8 'setuptools<81' to compare)")
    else:
        print(
            f"  mbrs 0.1.8 (DecoderMBR, Hamming as numpy pairwise_scores): {per * t_mbrs:.1f} s "
            f"per 10k prompts; O(M K) {t_mbrs / t_new:.0f}x faster, closed form "
            f"{t_mbrs / t_bayes:.0f}x"
        )


def decide_from_label_sets(n_prompts: int, m: int, seed: int) -> None:
    """End to end from Python label sets (what a reader gives): l_Sample and the Bayes action
    of every prompt, ours (`SetSpace.batch`: the cell's labels coded once, then array maths)
    against mbrs 0.1.8 given each prompt's Hamming matrix built from the same sets (the
    incidence matrix, then one numpy matrix product: the fastest a user can plug in). Issue 41
    goal: ours >= 10x mbrs at M = 20, 100 and 1000."""
    from pipeline.latent import get_space, incidence_matrix

    rng = np.random.default_rng(seed + m)
    sets = get_space("sets")
    cell = []
    for p in range(n_prompts):
        labels = [f"answer {p} {k}" for k in range(int(rng.integers(2, 11)))]
        share = rng.uniform(0.05, 0.95, len(labels))
        cell.append(
            [frozenset(x for x, q in zip(labels, share) if rng.random() < q) for _ in range(m)]
        )
    t0 = time.perf_counter()
    batch = sets.batch(cell)
    t_code = time.perf_counter() - t0
    actions, _ = batch.bayes()
    chosen, risks = batch.sample_mbr()
    t_ours = time.perf_counter() - t0
    per = 1e4 / n_prompts
    line = (
        f"decide from label sets, sets, M={m} ({n_prompts} prompts, per 10k prompts): ours "
        f"(batch + Bayes + l_Sample) {per * t_ours:.2f} s, of which coding the labels "
        f"{per * t_code:.2f} s"
    )
    try:
        from mbrs.decoders import DecoderMBR  # noqa: F401
    except ImportError:
        print(
            line + "; mbrs: not importable here (pip install mbrs==0.1.8 'setuptools<81' to "
            "compare)"
        )
        return
    t0 = time.perf_counter()
    x = [incidence_matrix(samples)[1] for samples in cell]
    width = max(1, max(a.shape[1] for a in x))
    padded = np.zeros((n_prompts, m, width), dtype=bool)
    for p, a in enumerate(x):
        padded[p, :, : a.shape[1]] = a
    expected = np.stack([np.pad(r, (0, m - len(r))) for r in batch.sample_risks()])
    t_mbrs = mbrs_sample_mbr(padded, expected) + (time.perf_counter() - t0)
    print(
        line + f"; mbrs 0.1.8 (incidence matrices + DecoderMBR) {per * t_mbrs:.2f} s: ours "
        f"{t_mbrs / t_ours:.1f}x faster (goal >= 10x)"
    )


def mbrs_sample_mbr(x: np.ndarray, expected_risks: np.ndarray) -> float | None:
    """Seconds mbrs takes for the same l_Sample (one `decode` per prompt, as mbrs has no batch
    over prompts), its metric the Hamming distance given as a whole numpy matrix per prompt (the
    fastest a user can plug in); the chosen samples are checked against ours. None: no mbrs."""
    try:
        import torch
        from mbrs.decoders import DecoderMBR
        from mbrs.metrics import Metric
    except ImportError:
        return None

    class HammingMetric(Metric):
        HIGHER_IS_BETTER = False

        def __init__(self) -> None:
            super().__init__(Metric.Config())
            self.x = None

        def score(self, hypothesis, reference, source=None):
            a, b = self.x[int(hypothesis)], self.x[int(reference)]
            return float(np.count_nonzero(a ^ b))

        def pairwise_scores(self, hypotheses, references, source=None):
            xf = self.x.astype(np.float64)
            sizes = xf.sum(axis=1)
            return torch.from_numpy(sizes[:, None] + sizes[None, :] - 2.0 * (xf @ xf.T))

    metric = HammingMetric()
    decoder = DecoderMBR(DecoderMBR.Config(), metric)
    ids = [str(i) for i in range(x.shape[1])]
    t0 = time.perf_counter()
    chosen = []
    for p in range(x.shape[0]):
        metric.x = x[p]
        chosen.append(decoder.decode(ids, ids).idx[0])
    seconds = time.perf_counter() - t0
    best = expected_risks.min(axis=1)
    assert all(expected_risks[p, i] == best[p] for p, i in enumerate(chosen)), "mbrs disagrees"
    return seconds


def decide_cell(n_prompts: int, m: int, seed: int) -> None:
    """The decide stage's latent maths for a MAQA-shaped cell (answer sets, M samples + 2
    decodes, 2-10 labels per prompt): Bayes, F-beta Bayes, l_MAP, l_Sample and the decodes'
    risks, one prompt at a time through the one-prompt API (the stage before issue 25) vs the
    cell at once (`LatentSpace.batch`), then the whole stage (`decide_many`, texts included)."""
    from pipeline.latent import get_space
    from pipeline.stages.decide import decide_many

    rng = np.random.default_rng(seed)
    sets, fbeta = get_space("sets"), get_space("sets-fbeta")
    cell = []
    for p in range(n_prompts):
        labels = [f"answer {p} {k}" for k in range(int(rng.integers(2, 11)))]
        share = rng.uniform(0.05, 0.95, len(labels))
        draw = lambda: frozenset(x for x, q in zip(labels, share) if rng.random() < q)  # noqa: E731, B023 - drawn in this iteration
        cell.append(([draw() for _ in range(m)], [draw(), draw()]))
    t0 = time.perf_counter()
    for samples, decodes in cell:
        sets.bayes(samples), fbeta.bayes(samples), sets.map(samples), sets.sample_mbr(samples)
        for action in decodes:
            sets.risk(action, samples)
    t_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    latents = [samples for samples, _ in cell]
    batch = sets.batch(latents)
    batch.bayes(), fbeta.batch(latents).bayes(), batch.map(), batch.sample_mbr()
    for d in range(2):
        batch.risk([decodes[d] for _, decodes in cell])
    t_cell = time.perf_counter() - t0
    prompts = [
        ([(s, "Answer") for s in samples], {"greedy": (decodes[0], "g"), "beam": (decodes[1], "b")})
        for samples, decodes in cell
    ]
    t0 = time.perf_counter()
    decide_many(sets, prompts, {"bayes_fbeta": fbeta})
    t_stage = time.perf_counter() - t0
    per = 1e3 / n_prompts
    print(
        f"decide maths, sets, M={m} ({n_prompts} prompts): one prompt at a time "
        f"{per * t_one:.2f} ms/prompt, the cell at once {per * t_cell:.2f} ms/prompt "
        f"({t_one / t_cell:.1f}x); whole decide stage with texts {per * t_stage:.2f} ms/prompt "
        f"({t_stage * 1e4 / n_prompts:.0f} s per 10k prompts)"
    )


if __name__ == "__main__":
    main()
