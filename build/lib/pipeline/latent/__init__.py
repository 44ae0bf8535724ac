"""Latent spaces: closed-form Bayes actions and risks (the mathematical core; numpy only).

    from pipeline.latent import SetSpace, get_space
    space = SetSpace()                          # or get_space("sets")
    res = space.bayes(latents, weights=None)    # BayesResult(action, risk)
    space.distance(a, b); space.risk(action, latents, weights=None)
    space.map(latents, weights=None)            # l_MAP, ties: first seen
    space.sample_mbr(latents, weights=None)     # l_Sample (pairwise), ties: first
    batch = space.batch(prompts)                # many prompts at once (uniform weights):
    batch.bayes(); batch.map(); batch.sample_mbr(); batch.risk(actions)

Registered names: classes, sets, sets-fbeta, graphs, sphere, simplex, reals.
"""

from __future__ import annotations

from .base import (BayesResult, LatentBatch, LatentSpace, LatentTypeError, available_spaces,
                   get_space, register, space_class)
from .classes import ClassSpace
from .codec import from_json, to_json
from .fbeta import FBetaSetSpace, f_beta, gfm
from .graphs import GraphSpace
from .reals import RealSpace
from .sets import (
    SetSpace,
    incidence_matrix,
    sets_bayes_batch,
    sets_pairwise_risks_batch,
    sets_sample_mbr_batch,
)
from .simplex import SimplexSpace
from .sphere import (
    SphereSpace,
    sphere_bayes_batch,
    sphere_pairwise_risks_batch,
    sphere_sample_mbr_batch,
)

__all__ = [
    "space_class",
    "BayesResult",
    "LatentBatch",
    "ClassSpace",
    "FBetaSetSpace",
    "GraphSpace",
    "LatentSpace",
    "LatentTypeError",
    "RealSpace",
    "SetSpace",
    "SimplexSpace",
    "SphereSpace",
    "available_spaces",
    "f_beta",
    "from_json",
    "get_space",
    "gfm",
    "incidence_matrix",
    "register",
    "sets_bayes_batch",
    "sets_pairwise_risks_batch",
    "sets_sample_mbr_batch",
    "sphere_bayes_batch",
    "sphere_pairwise_risks_batch",
    "sphere_sample_mbr_batch",
    "to_json",
]
