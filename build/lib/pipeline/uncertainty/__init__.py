"""Uncertainty estimators: lm-polygraph baselines, latent entropy, Bayes risk.

Importing this package is cheap: lm-polygraph and the models load inside the functions.
"""

from pipeline.uncertainty.bayes_risk import bayes_risk_frame
from pipeline.uncertainty.latent_entropy import (
    canonical_encoding,
    latent_entropy,
    latent_entropy_frame,
)
from pipeline.uncertainty.polygraph import (
    DEFAULT_ESTIMATORS,
    ESTIMATOR_CLASSES,
    compute_uncertainty,
    make_estimators,
)

__all__ = [
    "DEFAULT_ESTIMATORS",
    "ESTIMATOR_CLASSES",
    "bayes_risk_frame",
    "canonical_encoding",
    "compute_uncertainty",
    "latent_entropy",
    "latent_entropy_frame",
    "make_estimators",
]
