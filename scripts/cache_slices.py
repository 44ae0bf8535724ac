"""Every stage's config slice and cache key (without inputs) over the configurations the project
runs: the default sweep, the paper sweep, its rehearsal, the scorer's, and variants of the
settings each slice reads. A refactor that must keep every artifact current saves them first
and checks them after:

    python scripts/cache_slices.py --save /tmp/slices.json    # before
    python scripts/cache_slices.py --check /tmp/slices.json   # after: each difference named

A slice that cannot be computed here (a hub dataset offline) is recorded as its error's type, so
it compares too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE_NAMES = ("generate", "map", "decide", "uq", "evaluate")

DEFAULT_DATASETS = (
    "triviaqa_bundled",
    "maqa_bundled",
    "maqa_star_bundled",
    "wmt19_fien_bundled",
    "cnn_dm_bundled",
    "numeric_bundled",
)
PAPER_DATASETS = ("triviaqa", "maqa", "maqa_star", "wmt19_fien", "cnn_dm")
PAPER_MODELS = ("gemma-3-4b-it", "qwen3-4b", "qwen2.5-72b-instruct")
VARIANTS = (  # settings each slice reads, on one bundled cell
    ("dataset=maqa_bundled", "task=sets_fbeta"),
    ("dataset=triviaqa_bundled", "reading.unreadable=no_answer"),
    ("dataset=triviaqa_bundled", "reading.truncated=unreadable"),
    ("dataset=triviaqa_bundled", "generation.ptrue_asks=question"),
    ("dataset=triviaqa_bundled", "task.equivalence.backend=nli"),
    ("dataset=maqa_bundled", "task.extractor.kind=llm"),
    ("dataset=maqa_bundled", "evaluation.match_judge=equivalence"),
    ("dataset=numeric_bundled", "task.space_options.loss=l1"),
    (
        "dataset=triviaqa_bundled",
        "backend=openai",
        "backend.base_url=http://127.0.0.1:9/v1",
        "generation.strategies=[greedy]",
        "evaluation.targets=[bayes,greedy]",
    ),
    ("dataset=triviaqa_bundled", "backend=vllm"),
    ("dataset=triviaqa_bundled", "uq.groups.lm_polygraph.similarity=cross_encoder"),
)


def configurations() -> list[tuple[str, ...]]:
    runs = [("experiment=default", f"dataset={d}") for d in DEFAULT_DATASETS]
    runs += [
        ("experiment=paper", f"model={m}", f"dataset={d}")
        for m in PAPER_MODELS
        for d in PAPER_DATASETS
    ]
    runs += [
        ("experiment=paper", "+rehearsal=local", f"model={m}", f"dataset={d}")
        for m in ("qwen3-4b", "qwen2.5-72b-instruct")
        for d in PAPER_DATASETS
    ]
    runs += [("experiment=score", "dataset=triviaqa_bundled")]
    return runs + [tuple(v) for v in VARIANTS]


def slices() -> dict[str, dict]:
    from hydra import compose, initialize_config_dir

    from pipeline.artifacts.stage import STAGES
    from pipeline.artifacts.store import cache_key
    from pipeline.config import register_configs

    try:  # the resolved cell, where the stages take one
        from pipeline.config import resolve_cell
    except ImportError:  # before: the stages took the config

        def resolve_cell(cfg):
            return cfg

    register_configs()
    out = {}
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for overrides in configurations():
            cfg = compose("config", overrides=list(overrides))
            cell = resolve_cell(cfg)
            row = {}
            for name in STAGE_NAMES:
                spec = STAGES[name]
                try:
                    slice_ = spec.config_slice(cell)
                    row[name] = {"slice": slice_, "key": cache_key(slice_, {}, spec.version)}
                except Exception as exc:  # noqa: BLE001 - recorded and compared, not hidden
                    row[name] = {"error": type(exc).__name__}
            out[" ".join(overrides)] = row
    return json.loads(json.dumps(out, default=str))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path)
    action.add_argument("--check", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # the rehearsal's stand-in endpoint, started by scripts/rehearsal.sh: any fixed address
    os.environ.setdefault("REHEARSAL_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    now = slices()
    if args.save:
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True))
        print(
            f"{sum(len(r) for r in now.values())} slices of {len(now)} configurations -> {args.save}"
        )
        return 0
    before = json.loads(args.check.read_text())
    differ = [
        (run, name)
        for run in sorted(set(before) | set(now))
        for name in STAGE_NAMES
        if before.get(run, {}).get(name) != now.get(run, {}).get(name)
    ]
    for run, name in differ:
        print(
            f"DIFFERS {run} [{name}]\n  before {before.get(run, {}).get(name)}\n"
            f"  now    {now.get(run, {}).get(name)}"
        )
    errors = sum("error" in r for row in now.values() for r in row.values())
    print(
        f"{len(now)} configurations, {len(now) * len(STAGE_NAMES)} slices ({errors} not "
        f"computable here, compared as errors): {len(differ)} differ"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
