"""Task-aware Bayes decoding and uncertainty for LLMs.

    import pipeline
    df = pipeline.score([["Paris", "Paris", "Lyon"]], task="classes")

Importing the package is cheap: heavy libraries are imported inside the functions that use them.
"""

from pipeline.api import agenerate_and_score, generate_and_score, report, score, summaries

__version__ = "0.1.0"
# `taskaware doctor` reads this line in the installed file: another distribution's
# pipeline/__init__.py (PyPI's `pipeline`) installed over it lacks it
__distribution__ = "task-aware-pipeline"
__all__ = ["agenerate_and_score", "generate_and_score", "report", "score", "summaries"]
