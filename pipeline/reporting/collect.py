"""Read every cell's artifacts of an experiment into tidy frames (the report reads only artifacts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.artifacts.store import ArtifactError, ArtifactStore


def canonical_dataset(name: str) -> str:
    return name.removesuffix("_bundled")


@dataclass
class Cell:
    model: str
    dataset: str  # as configured (e.g. maqa_bundled)
    store: ArtifactStore

    @property
    def canonical(self) -> str:
        return canonical_dataset(self.dataset)

    @property
    def name(self) -> str:
        """ "experiment/model/dataset", as the stages record it in each manifest they write."""
        from pipeline.artifacts.stage import cell_name

        return cell_name(self.store.root)

    def read(self, artifact: str) -> pd.DataFrame:
        """The cell's artifact, refused when its manifest says another cell made it (a file
        copied between cells would put that cell's numbers under this one's name)."""
        from pipeline.artifacts.schema import SCORER_PRODUCER

        manifest = self.store.manifest(artifact) or {}
        made_for = manifest.get("cell")
        if manifest.get("producer") == SCORER_PRODUCER:  # a scorer work folder copied in
            raise ArtifactError(
                f"report: {self.store.path(artifact)} was made by the scorer ({SCORER_PRODUCER}, "
                f"for {made_for}), not by this pipeline's stages; remove it and rerun stage=all "
                f"for {self.name}"
            )
        # model/dataset only: an experiment folder copied or renamed as a whole stays readable
        if made_for and made_for.split("/", 1)[-1] != f"{self.model}/{self.dataset}":
            raise ArtifactError(
                f"report: {self.store.path(artifact)} was made for cell {made_for}, not "
                f"{self.name}; remove it and rerun stage=all for {self.name}"
            )
        return self.store.read(artifact)

    @property
    def space(self) -> str | None:
        """The latent space the cell's decisions were made in (its decide manifest)."""
        manifest = self.store.manifest("decisions")
        return (manifest or {}).get("config", {}).get("space")


def find_cells(
    output_root: str | Path, experiment: str, models: list[str] | None = None
) -> list[Cell]:
    root = Path(output_root) / experiment
    cells = []
    if not root.exists():
        return cells
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if models and model_dir.name not in models:
            continue
        for ds_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            cells.append(Cell(model_dir.name, ds_dir.name, ArtifactStore(ds_dir)))
    return cells


def _tagged(cells: list[Cell], artifact: str) -> pd.DataFrame:
    frames = []
    for cell in cells:
        if cell.store.manifest(artifact) is None:
            continue
        # the dataset artifact has its own `dataset` column (the configured name): replace it
        df = cell.read(artifact).drop(columns=["model", "dataset"], errors="ignore")
        df.insert(0, "dataset", cell.canonical)
        df.insert(0, "model", cell.model)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _mean(values) -> float:
    return float(np.mean(values))


_mean.batched = lambda stacks: stacks.mean(axis=1)  # type: ignore[attr-defined]  # bootstrap


def quality_means(
    cells: list[Cell], n_bootstrap: int = 1000, alpha: float = 0.05, seed: int = 0
) -> pd.DataFrame:
    """Mean quality per (model, dataset, method, metric), as Table 2 reports it, with the prompts
    it averages (n) and a percentile bootstrap interval of the mean (low, high; NaN with
    n_bootstrap=0), the evaluate stage's settings (evaluation.n_bootstrap, ci_alpha, seed)."""
    from pipeline.evaluation.bootstrap import bootstrap_ci

    columns = ["model", "dataset", "method", "metric", "value", "n", "low", "high"]
    q = _tagged(cells, "quality")
    if q.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (model, dataset, method, metric), values in q.groupby(
        ["model", "dataset", "method", "metric"], sort=False
    )["value"]:
        v = values.to_numpy(dtype=float)
        low = high = np.nan
        if n_bootstrap > 0 and len(v) > 1:
            _, low, high = bootstrap_ci(_mean, v, n_boot=n_bootstrap, alpha=alpha, seed=seed)
        rows.append((model, dataset, method, metric, float(v.mean()), len(v), low, high))
    return pd.DataFrame(rows, columns=columns)


def _mean_difference(a, b) -> float:
    return float(np.mean(a - b))


_mean_difference.batched = lambda a, b: (a - b).mean(axis=1)  # type: ignore[attr-defined]

BAYES_VS_BEAM = [
    "model",
    "dataset",
    "metric",
    "higher_is_better",
    "n",
    "ours",
    "baseline",
    "ours_mean",
    "baseline_mean",
    "difference",
    "low",
    "high",
    "verdict",
]


def bayes_vs_beam(
    q: pd.DataFrame, n_bootstrap: int = 1000, alpha: float = 0.05, seed: int = 0
) -> pd.DataFrame:
    """Per (model, dataset, metric): the Bayes answer's (pipeline.components.methods.OURS) mean quality
    minus beam search's (BASELINE), over the prompts where both were scored, with a paired
    percentile bootstrap interval (one draw of prompts for both methods), and the verdict it
    allows: "better" / "worse" when the interval excludes 0 in the metric's direction, else
    "no difference shown". `q`: the cells' per-prompt quality (`per_prompt(cells, "quality")`)."""
    from pipeline.components.methods import BASELINE, OURS
    from pipeline.evaluation.bootstrap import bootstrap_ci

    rows = []
    if q.empty:
        return pd.DataFrame(columns=BAYES_VS_BEAM)
    q = q[q["method"].isin([OURS, BASELINE])]
    for (model, dataset, metric), block in q.groupby(["model", "dataset", "metric"], sort=False):
        wide = block.pivot_table(index="prompt_id", columns="method", values="value").dropna()
        if not {OURS, BASELINE} <= set(wide.columns) or wide.empty:
            continue
        ours, baseline = wide[OURS].to_numpy(float), wide[BASELINE].to_numpy(float)
        higher = bool(block["higher_is_better"].iloc[0])
        diff, low, high = float(np.mean(ours - baseline)), np.nan, np.nan
        if n_bootstrap > 0 and len(ours) > 1:
            _, low, high = bootstrap_ci(
                _mean_difference, ours, baseline, n_boot=n_bootstrap, alpha=alpha, seed=seed
            )
        # float noise is no difference: two decisions scored 13.037 each may differ in the 15th
        # digit, and a bootstrap of such differences excludes 0 by rounding alone
        tol = 1e-9 * max(1.0, float(np.abs(ours).max()), float(np.abs(baseline).max()))
        if np.isnan(low) or low <= tol and high >= -tol:
            verdict = "no difference shown"
        else:
            verdict = "better" if (low > tol) == higher else "worse"
        rows.append(
            (
                model,
                dataset,
                metric,
                higher,
                len(ours),
                OURS,
                BASELINE,
                float(ours.mean()),
                float(baseline.mean()),
                diff,
                low,
                high,
                verdict,
            )
        )
    return pd.DataFrame(rows, columns=BAYES_VS_BEAM)


def bayes_vs_beam_lines(frame: pd.DataFrame, alpha: float = 0.05) -> list[str]:
    """One sentence per row of `bayes_vs_beam`."""
    from pipeline.components.methods import METHODS

    level = round(100 * (1 - alpha))
    lines = []
    for r in frame.itertuples():
        ours, baseline = METHODS[r.ours].label, METHODS[r.baseline].label
        lines.append(
            f"{r.dataset} {r.metric} ({r.model}, {'higher' if r.higher_is_better else 'lower'} "
            f"is better): {ours} {r.ours_mean:.3f} vs {baseline} {r.baseline_mean:.3f}, "
            f"difference {r.difference:+.3f} [{r.low:+.3f}, {r.high:+.3f}] ({level}% paired "
            f"bootstrap, n = {r.n}): "
            + (f"{ours} is {r.verdict}" if r.verdict != "no difference shown" else r.verdict)
        )
    return lines


def uq_scores(cells: list[Cell]) -> pd.DataFrame:
    return _tagged(cells, "uq_scores")


def per_prompt(cells: list[Cell], artifact: str) -> pd.DataFrame:
    return _tagged(cells, artifact)


def data_files(cells: list[Cell]) -> dict[str, list[tuple[str, dict]]]:
    """{dataset: [(model, its source)]} of the cells whose data came from a released file
    (their generate manifests' record with its SHA-256: not a bundled set, not a hub split), so
    that every table using such a dataset can say which file it was."""
    out: dict[str, list[tuple[str, dict]]] = {}
    for cell in cells:
        entry = ((cell.store.manifest("dataset") or {}).get("revisions") or {}).get("dataset")
        if isinstance(entry, dict) and entry.get("sha256") and entry.get("source") != "bundled":
            out.setdefault(cell.canonical, []).append((cell.model, entry))
    return out


def input_keys(
    cells: list[Cell],
    artifacts=("quality", "uq_scores", "uncertainty", "latents", "decisions", "dataset"),
) -> dict[str, str]:
    """Cache keys of everything the report reads (for the report's own cache key)."""
    keys = {}
    for cell in cells:
        for a in artifacts:
            k = cell.store.key(a)
            if k:
                keys[f"{cell.model}/{cell.dataset}/{a}"] = k
    return keys
