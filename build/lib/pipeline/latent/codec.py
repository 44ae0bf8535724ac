"""JSON encoding of latents for artifacts (``latents.parquet``, ``decisions.parquet``).

Each latent space owns its JSON form (``LatentSpace.encode`` / ``decode``): classes -> JSON
scalar; sets / sets-fbeta -> sorted list; graphs -> sorted list of [h, r, t]; sphere -> list of
floats; simplex -> object (keys sorted); reals -> number; None <-> "null". These two functions
look the space up by name. Round trips are exact: floats are written with Python's shortest
round-tripping repr.
"""

from __future__ import annotations

from typing import Any

from .base import get_space


def to_json(space_name: str, latent: Any) -> str:
    """Encode one latent of ``space_name`` as a JSON string (``None`` -> ``"null"``)."""
    return get_space(space_name).to_json(latent)


def from_json(space_name: str, s: str) -> Any:
    """Decode ``to_json``'s output back to the space's latent (``"null"`` -> ``None``)."""
    return get_space(space_name).from_json(s)
