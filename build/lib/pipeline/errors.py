"""Errors a user can act on: their message says what is wrong and how to fix it, and the
command line prints that message alone (no traceback) and exits with status 2."""

from __future__ import annotations


class PipelineError(Exception):
    """Base of the errors whose message is the whole story."""


class ConfigError(PipelineError, ValueError):
    """A config value is out of range or unknown; raised before any model loads."""
