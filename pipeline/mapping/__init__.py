"""Map stage: g_T implementations turning free-form responses into latent structures.

Import-light on purpose: only the stdlib parsers are imported here; the readers that need models
live in submodules (`equivalence`, `embed`) and import their heavy dependencies inside functions.
Each task's own reader is in its folder (pipeline/tasks/<task>/reading.py); the HTTP client is
pipeline.clients.
"""

from pipeline.mapping.parsing import extract_answers, parse_distribution

__all__ = ["extract_answers", "parse_distribution"]
