"""Map stage: g_T implementations turning free-form responses into latent structures.

Import-light on purpose: only the stdlib parsers are imported here; extractors that need models
or HTTP clients live in submodules (`sets`, `graphs`, `simplex`, `llm_client`, `equivalence`,
`embed`) and import their heavy dependencies inside functions.
"""

from pipeline.mapping.parsing import extract_answers, parse_distribution

__all__ = ["extract_answers", "parse_distribution"]
