#!/usr/bin/env python
"""Check a rehearsal's results and print its wall times (the last step of `make rehearsal`).

    python scripts/rehearsal_summary.py outputs/rehearsal [--sweep-seconds N]

Fails (exit 1) unless every cell of the sweep has every artifact and every paper table and
figure exists with our numbers in it; prints wall time per cell and stage (from the artifacts'
manifests) and the stage totals.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

STAGE_OF = {
    "samples": "generate",
    "latents": "map",
    "decisions": "decide",
    "uncertainty": "uq",
    "uq_scores": "evaluate",
}


def cells(root: Path, experiment: str) -> list[Path]:
    base = root / experiment
    return (
        sorted(
            d
            for m in base.iterdir()
            if m.is_dir() and not m.name.startswith(".")
            for d in m.iterdir()
            if d.is_dir()
        )
        if base.exists()
        else []
    )


def check(root: Path, experiment: str = "paper") -> tuple[list[str], dict]:
    from pipeline.reporting import FIGURE_NAMES, TABLE_NAMES

    problems, times = [], {}
    found = cells(root, experiment)
    if not found:
        problems.append(f"no cells under {root / experiment}")
    for cell in found:
        name = f"{cell.parent.name}/{cell.name}"
        times[name] = {}
        for artifact, stage in STAGE_OF.items():
            manifest = cell / f"{artifact}.manifest.json"
            if not manifest.exists():
                problems.append(f"{name}: no {artifact} artifact (stage {stage})")
                continue
            times[name][stage] = json.loads(manifest.read_text())["wall_time_s"] or 0.0
    results = root / "results"
    report = results / ".report.manifest.json"
    if not report.exists():
        problems.append("no report manifest: the report did not run")
    else:
        covered = set(json.loads(report.read_text()).get("cells", []))
        expected = {f"{c.parent.name}/{c.name}" for c in found}
        if covered != expected:
            problems.append(
                f"the report covers {sorted(covered)}, the sweep has {sorted(expected)}"
            )
    for table in TABLE_NAMES:
        for ext in ("md", "tex", "csv"):
            if not (results / "tables" / f"{table}.{ext}").exists():
                problems.append(f"table {table}.{ext} missing")
        csv = results / "tables" / f"{table}.csv"
        if csv.exists() and ",ours," not in csv.read_text():
            problems.append(f"table {table} has no rows of ours")
    for figure in FIGURE_NAMES:
        for ext in ("png", "pdf"):
            if not (results / "figures" / f"{figure}.{ext}").exists():
                problems.append(f"figure {figure}.{ext} missing")
    return problems, times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--experiment", default="paper")
    parser.add_argument("--sweep-seconds", type=float)
    args = parser.parse_args(argv)
    problems, times = check(args.root, args.experiment)
    stages = list(dict.fromkeys(STAGE_OF.values()))
    print("| cell | " + " | ".join(stages) + " | total |")
    print("|---|" + "---:|" * (len(stages) + 1))
    totals = dict.fromkeys(stages, 0.0)
    for cell, row in times.items():
        for s in stages:
            totals[s] += row.get(s, 0.0)
        print(
            f"| {cell} | "
            + " | ".join(f"{row.get(s, float('nan')):.1f}" for s in stages)
            + f" | {sum(row.values()):.1f} |"
        )
    print(
        "| all cells | "
        + " | ".join(f"{totals[s]:.1f}" for s in stages)
        + f" | {sum(totals.values()):.1f} |"
    )
    if args.sweep_seconds is not None:
        print(
            f"sweep wall time (jobs run side by side on the local cluster): "
            f"{args.sweep_seconds:.0f} s"
        )
    if problems:
        print("REHEARSAL INCOMPLETE:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"rehearsal complete: {len(times)} cells, every paper table and figure written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
