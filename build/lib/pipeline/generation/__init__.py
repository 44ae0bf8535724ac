"""Generation layer: backends (transformers, vLLM), decoding strategies, P(True).

Heavy libraries are imported inside the functions that need them; importing this package is cheap.
"""

from pipeline.generation.base import (
    Generation,
    GenerationBackend,
    SamplingConfig,
    get_backend,
    register_backend,
)

__all__ = ["Generation", "GenerationBackend", "SamplingConfig", "get_backend", "register_backend"]
