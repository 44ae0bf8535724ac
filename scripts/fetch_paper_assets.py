#!/usr/bin/env python
"""Fetch what `experiment=paper` reads but no loader downloads by itself (`make paper-assets`).

Run it once on a machine with the network (a cluster's login node) before launching the sweep;
compute nodes often have no internet. Everything lands in the pipeline's cache
(`$TASK_AWARE_CACHE`, default ~/.cache/task-aware) or the HuggingFace cache, where the paper
configuration looks for it:

- MAQA: the official repository's JSON (https://github.com/YangYongJin/MAQA-Official-Repo, 2,042
  questions; no hub copy exists) at the pinned commit, checked against the pinned SHA-256 (both
  `overrides.commit` / `overrides.sha256` of conf/dataset/maqa.yaml, which the loader checks
  too), -> <cache>/data/maqa/MAQA.json, with MAQA.json.source.json recording the repository,
  commit, file and SHA-256 it came from. The pin is empty until someone with the network reads
  it (this project's machines cannot reach GitHub): unpinned, the default branch's head is
  taken and its commit and hash are written into conf/dataset/maqa.yaml (commit that change);
- the CNN/DM-based summarisation benchmark of Zhang et al. 2023: writer_summaries.json of
  https://github.com/Tiiiger/benchmark_llm_summarization at a pinned commit (302 freelance-writer
  summaries of 109 articles, checked by SHA-256) -> <cache>/data/cnn_dm/writer_summaries.json
  (conf/dataset/cnn_dm.yaml);
- AlignScore-large.ckpt (hub repo yzha/AlignScore) -> <cache>/alignscore/ and its base model
  roberta-large into the HF cache;
- COMET Unbabel/wmt22-comet-da (and its xlm-roberta-large encoder) into the HF cache;
- NLTK's Punkt data (punkt_tab), AlignScore's sentence splitter;
- with --models: every hub model of the paper sweep (LLMs, DeBERTa-large-MNLI, EmbeddingGemma,
  lm-polygraph's cross-encoder) and the hub datasets, into the HF caches (hundreds of GB);
- last, the revisions to pin: the commit each auxiliary checkpoint of `experiment=paper` (NLI
  model, EmbeddingGemma, cross-encoder, COMET, AlignScore's base) resolves to, from the HF cache
  (what an offline run reads) or else the hub, printed as the settings to write into
  conf/experiment/paper.yaml (docs/revisions.md).

spaCy's en_core_web_sm is not fetched: AlignScore needs it only for its SMART modes, which the
pipeline does not use (pipeline/evaluation/text_metrics.py builds the inferencer without it).
Each step says what it fetched or why it failed; the exit code is the number of failed steps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAQA_REPO = "https://github.com/YangYongJin/MAQA-Official-Repo"
# The MAQA pin (overrides.commit and overrides.sha256): read by the loader and by this script,
# written by this script's first fetch (no machine of this project reaches GitHub).
MAQA_CONFIG = ROOT / "conf" / "dataset" / "maqa.yaml"
# The benchmark's last commit ("update data.", 2023-03-20); the file is unchanged since the first.
CNN_DM_COMMIT = "4e87890ed070c7db3dd5c1125adb5bde0ccd2eb1"
CNN_DM_URL = (
    "https://raw.githubusercontent.com/Tiiiger/benchmark_llm_summarization/"
    f"{CNN_DM_COMMIT}/writer_summaries.json"
)
CNN_DM_SHA256 = "9071a2e3628cfc22aa22bad2f394351e270393b892c6b9185a24d969dc67491f"
ALIGNSCORE_REPO, ALIGNSCORE_FILE = "yzha/AlignScore", "AlignScore-large.ckpt"
PAPER_MODELS = [
    "google/gemma-3-4b-it",
    "google/gemma-3-12b-it",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen2.5-72B-Instruct",
    "microsoft/deberta-large-mnli",
    "google/embeddinggemma-300m",
    "roberta-large",
]
HUB_DATASETS = [
    ("mandarjoshi/trivia_qa", "rc.nocontext", "validation"),
    ("ttomov/maqa_star", None, "train"),
    ("wmt/wmt19", "fi-en", "validation"),
]
# The auxiliary checkpoints of experiment=paper and the setting that pins each
# (conf/experiment/paper.yaml; tests/pipeline/test_paper_pins.py checks both against it).
AUX_PINS = [
    ("task.equivalence.nli_revision", "microsoft/deberta-large-mnli"),
    ("mappers.sphere.embedder_revision", "google/embeddinggemma-300m"),
    ("uq.groups.lm_polygraph.cross_encoder_revision", "cross-encoder/stsb-roberta-large"),
    ("metrics.comet.revision", "Unbabel/wmt22-comet-da"),
    ("metrics.alignscore.model_revision", "roberta-large"),
]


def cache_dir() -> Path:
    return Path(os.environ.get("TASK_AWARE_CACHE", Path.home() / ".cache" / "task-aware"))


def looks_like_maqa(path: Path) -> int:
    """Number of {question, answers} items in a JSON file (0 when it is not MAQA-like)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    if isinstance(data, dict):  # {"data": [...]} and similar
        data = next((v for v in data.values() if isinstance(v, list)), [])
    if not isinstance(data, list):
        return 0
    return sum(1 for x in data if isinstance(x, dict) and "question" in x and "answers" in x)


def find_maqa_json(repo_dir: Path) -> Path:
    """The JSON file of a MAQA checkout with the most {question, answers} items."""
    scored = sorted(((looks_like_maqa(p), p) for p in repo_dir.rglob("*.json")), reverse=True)
    if not scored or scored[0][0] == 0:
        raise FileNotFoundError(f"no JSON with question/answers items under {repo_dir}")
    return scored[0][1]


def fetch_maqa(
    target: Path, repo: str = MAQA_REPO, commit: str | None = None, sha256: str | None = None
) -> str:
    """The MAQA JSON of `repo` at `commit` (None: the default branch's head), checked against
    `sha256` before it replaces `target`; its provenance goes to <target>.source.json."""
    import hashlib

    with tempfile.TemporaryDirectory() as tmp:
        checkout = Path(tmp) / "maqa"
        git = ["git", "-c", "advice.detachedHead=false"]
        subprocess.run(
            git + ["clone", "--quiet", repo, str(checkout)],
            check=True,
            capture_output=True,
            text=True,
        )
        if commit is not None:
            subprocess.run(
                git + ["-C", str(checkout), "checkout", "--quiet", commit],
                check=True,
                capture_output=True,
                text=True,
            )
        head = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        source = find_maqa_json(checkout)
        data = source.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if sha256 is not None and digest != sha256:
            raise ValueError(
                f"{repo} at {head}: {source.name} has SHA-256 {digest}, not the pinned {sha256}"
            )
        provenance = {
            "repository": repo,
            "commit": head,
            "file": str(source.relative_to(checkout)),
            "sha256": digest,
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_suffix(".part")
        part.write_bytes(data)
        part.replace(target)
        Path(f"{target}.source.json").write_text(
            json.dumps(provenance, indent=1) + "\n", encoding="utf-8"
        )
    pin = "" if commit is not None else " [UNPINNED: the default branch's head]"
    return (
        f"{looks_like_maqa(target)} questions from {provenance['file']} at {head[:12]}, "
        f"sha256 {digest[:12]} -> {target}{pin}"
    )


def maqa_pin(config: Path = MAQA_CONFIG) -> tuple[str | None, str | None]:
    """(commit, sha256) of the MAQA pin in `config` (None where not yet filled)."""
    import yaml

    overrides = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("overrides") or {}
    return overrides.get("commit"), overrides.get("sha256")


def fill_maqa_pin(config: Path, commit: str, sha256: str) -> list[str]:
    """Write `commit` and `sha256` into the `null` pin lines of `config` (its comments and other
    lines kept); returns the keys filled."""
    import re

    text, filled = config.read_text(encoding="utf-8"), []
    for key, value in (("commit", commit), ("sha256", sha256)):
        text, n = re.subn(
            rf"^([ \t]+{key}:)[ \t]*null[ \t]*$",
            rf'\g<1> "{value}"',
            text,
            count=1,
            flags=re.MULTILINE,
        )  # quoted: a hash stays a string
        filled += [key] * n
    part = config.with_suffix(".part")
    part.write_text(text, encoding="utf-8")
    part.replace(config)
    return filled


def fetch_and_pin_maqa(target: Path, config: Path = MAQA_CONFIG, repo: str = MAQA_REPO) -> str:
    """MAQA at the pin of `config`; unpinned, the default branch's head, whose commit and
    SHA-256 then fill the pin (the first fetch pins what every later one reads)."""
    commit, sha256 = maqa_pin(config)
    said = fetch_maqa(target, repo, commit, sha256)
    if commit is not None and sha256 is not None:
        return said
    got = json.loads(Path(f"{target}.source.json").read_text(encoding="utf-8"))
    filled = fill_maqa_pin(config, got["commit"], got["sha256"])
    return (
        f"{said}; pinned in {config} ({', '.join(filled) or 'nothing: no null pin line'}): "
        f"commit {got['commit']}, sha256 {got['sha256']} (commit that file)"
    )


def revisions_to_pin(pins: list[tuple[str, str]] = AUX_PINS) -> str:
    """The commit each auxiliary checkpoint resolves to now (the HF cache's, as an offline run
    reads it, else the hub's), as the lines to write into conf/experiment/paper.yaml; raises,
    naming them, when some resolve to nothing (not cached, hub unreachable)."""
    from pipeline.runtime.revisions import cached_commit, online_commit

    lines, unresolved = [], []
    for key, repo in pins:
        commit = cached_commit(repo) or online_commit(repo)
        lines.append(f"  {key}={commit or '<unresolved>'}  # {repo}")
        if commit is None:
            unresolved.append(repo)
    said = "the values to pin in conf/experiment/paper.yaml (docs/revisions.md):\n" + "\n".join(
        lines
    )
    if unresolved:
        raise RuntimeError(
            f"{said}\n  not in the HF cache and the hub unreachable: "
            f"{', '.join(unresolved)} (run with MODELS=1 where the hub is)"
        )
    return said


def fetch_cnn_dm_benchmark(
    target: Path, url: str = CNN_DM_URL, sha256: str | None = CNN_DM_SHA256
) -> str:
    """writer_summaries.json, checked (SHA-256, then its {article_id, article, summary} entries)
    before it replaces `target`."""
    import hashlib
    import urllib.request

    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise ValueError(f"{url}: SHA-256 {digest} != the pinned {sha256}")
    rows = json.loads(data)
    keys = {"article_id", "article", "summary"}
    if (
        not isinstance(rows, list)
        or not rows
        or not all(isinstance(r, dict) and keys <= set(r) for r in rows)
    ):
        raise ValueError(f"{url}: not a JSON list of {sorted(keys)} objects")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    articles = len({r["article_id"] for r in rows})
    return f"{len(rows)} writer summaries of {articles} articles -> {target}"


def fetch_alignscore(target_dir: Path) -> str:
    from huggingface_hub import hf_hub_download, snapshot_download

    path = hf_hub_download(ALIGNSCORE_REPO, ALIGNSCORE_FILE, local_dir=target_dir)
    snapshot_download("roberta-large", allow_patterns=["*.json", "*.txt", "merges.txt"])
    return f"{path} (+ roberta-large config and tokenizer)"


def fetch_comet() -> str:
    from comet import download_model

    return download_model("Unbabel/wmt22-comet-da")


def fetch_punkt() -> str:
    import nltk

    ok = nltk.download("punkt_tab", quiet=True)
    if not ok:
        raise RuntimeError("nltk.download('punkt_tab') failed")
    return "punkt_tab"


def fetch_models() -> str:
    import datasets
    from huggingface_hub import snapshot_download

    for repo in PAPER_MODELS + ["cross-encoder/stsb-roberta-large"]:
        snapshot_download(repo)
    for path, config, split in HUB_DATASETS:
        datasets.load_dataset(path, config, split=split)
    return f"{len(PAPER_MODELS) + 1} models and {len(HUB_DATASETS)} datasets in the HF caches"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        action="store_true",
        help="also download every hub model and dataset of the paper sweep",
    )
    args = parser.parse_args(argv)
    cache = cache_dir()
    steps = [
        ("MAQA JSON", lambda: fetch_and_pin_maqa(cache / "data" / "maqa" / "MAQA.json")),
        (
            "CNN/DM benchmark",
            lambda: fetch_cnn_dm_benchmark(cache / "data" / "cnn_dm" / "writer_summaries.json"),
        ),
        ("AlignScore checkpoint", lambda: fetch_alignscore(cache / "alignscore")),
        ("COMET wmt22-comet-da", fetch_comet),
        ("NLTK punkt_tab", fetch_punkt),
    ]
    if args.models:
        steps.append(("hub models and datasets", fetch_models))
    steps.append(("revisions to pin", revisions_to_pin))
    failed = 0
    for name, step in steps:
        try:
            print(f"[paper-assets] {name}: {step()}", flush=True)
        except Exception as exc:  # report every step, then fail with the count
            failed += 1
            print(f"[paper-assets] {name}: FAILED ({type(exc).__name__}: {exc})", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
