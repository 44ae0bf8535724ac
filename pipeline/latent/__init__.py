"""Latent spaces: closed-form Bayes actions and risks (the mathematical core; numpy only).

    from pipeline.latent import SetSpace, get_space
    space = SetSpace()                          # or get_space("sets")
    res = space.bayes(latents, weights=None)    # BayesResult(action, risk)
    space.distance(a, b); space.risk(action, latents, weights=None)
    space.map(latents, weights=None)            # l_MAP, ties: first seen
    space.sample_mbr(latents, weights=None)     # l_Sample (pairwise), ties: first
    batch = space.batch(prompts)                # many prompts at once (uniform weights):
    batch.bayes(); batch.map(); batch.sample_mbr(); batch.risk(actions)

Registered names: classes, sets, sets-fbeta, graphs, sphere, simplex, reals. Each space lives in
its task's folder (pipeline/tasks/<task>/space.py, numpy only) and is re-exported here by its
public name on first use, so `import pipeline.latent` imports only the base.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import (
    BayesResult,
    LatentBatch,
    LatentSpace,
    LatentTypeError,
    available_spaces,
    get_space,
    register,
    space_class,
)
from .codec import from_json, to_json

# public name -> the task folder whose space.py defines it
_SPACE_MODULES = {
    "ClassSpace": "classes",
    "SetSpace": "sets",
    "incidence_matrix": "sets",
    "sets_bayes_batch": "sets",
    "sets_pairwise_risks_batch": "sets",
    "sets_sample_mbr_batch": "sets",
    "FBetaSetSpace": "sets_fbeta",
    "f_beta": "sets_fbeta",
    "gfm": "sets_fbeta",
    "GraphSpace": "graphs",
    "RealSpace": "reals",
    "SimplexSpace": "simplex",
    "SphereSpace": "sphere",
    "sphere_bayes_batch": "sphere",
    "sphere_pairwise_risks_batch": "sphere",
    "sphere_sample_mbr_batch": "sphere",
}


def __getattr__(name: str) -> Any:
    if name in _SPACE_MODULES:
        value = getattr(
            importlib.import_module(f"pipeline.tasks.{_SPACE_MODULES[name]}.space"), name
        )
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'pipeline.latent' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SPACE_MODULES})


__all__ = [  # the base's names, then the spaces' (_SPACE_MODULES)
    "BayesResult",
    "LatentBatch",
    "LatentSpace",
    "LatentTypeError",
    "available_spaces",
    "from_json",
    "get_space",
    "register",
    "space_class",
    "to_json",
    "ClassSpace",
    "FBetaSetSpace",
    "GraphSpace",
    "RealSpace",
    "SetSpace",
    "SimplexSpace",
    "SphereSpace",
    "f_beta",
    "gfm",
    "incidence_matrix",
    "sets_bayes_batch",
    "sets_pairwise_risks_batch",
    "sets_sample_mbr_batch",
    "sphere_bayes_batch",
    "sphere_pairwise_risks_batch",
    "sphere_sample_mbr_batch",
]
