"""Artifacts: their column contracts (schema), the store that writes and reads them
atomically with manifests, and the stage contract (a stage is one function from named input
artifacts to a named output artifact)."""
