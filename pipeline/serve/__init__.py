"""`taskaware serve`: task-aware answers behind an OpenAI-compatible chat-completions endpoint
(docs/serve.md). FastAPI and uvicorn (the `serve` extra) are imported by pipeline.serve.app and
pipeline.serve.cli only, never here."""

from pipeline.serve.settings import ServeSettings

__all__ = ["ServeSettings"]
