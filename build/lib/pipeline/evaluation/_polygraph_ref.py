"""lm-polygraph 0.7.0's numpy-only PRR code, loaded without its package ``__init__``.

The reference that ``pipeline.evaluation.uq_metrics.prr`` is checked against (tests) and timed
against (``scripts/bench_eval.py``). ``import lm_polygraph`` pulls torch, transformers and spaCy
(~45 s here); the two files needed (``ue_metrics/ue_metric.py``, ``ue_metrics/pred_rej_area.py``)
only need numpy. They are executed unchanged from the installed package, under a private package
name, so nothing else of lm-polygraph is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

PRIVATE_PACKAGE = "_lm_polygraph_ue_metrics"


class PolygraphNotInstalledError(ModuleNotFoundError):
    """lm-polygraph is not installed, so its reference PRR code cannot be loaded."""


def load_polygraph_ue_metrics() -> types.SimpleNamespace:
    """lm-polygraph's PredictionRejectionArea, get_random_scores and normalize_metric (unchanged).

    Raises PolygraphNotInstalledError (with the install command) when lm-polygraph is missing.
    """
    spec = importlib.util.find_spec("lm_polygraph")  # locates the package, does not import it
    if spec is None or not spec.submodule_search_locations:
        raise PolygraphNotInstalledError(
            "lm-polygraph is not installed (pip install lm-polygraph==0.7.0)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "ue_metrics"
    if PRIVATE_PACKAGE not in sys.modules:
        package = types.ModuleType(PRIVATE_PACKAGE)
        package.__path__ = [str(folder)]  # relative imports inside resolve to these files
        sys.modules[PRIVATE_PACKAGE] = package
    ue_metric = importlib.import_module(f"{PRIVATE_PACKAGE}.ue_metric")
    pred_rej_area = importlib.import_module(f"{PRIVATE_PACKAGE}.pred_rej_area")
    return types.SimpleNamespace(
        PredictionRejectionArea=pred_rej_area.PredictionRejectionArea,
        get_random_scores=ue_metric.get_random_scores,
        normalize_metric=ue_metric.normalize_metric,
    )
