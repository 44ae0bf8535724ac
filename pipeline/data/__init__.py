"""Datasets (real HuggingFace loaders + bundled offline sets) and prompt templates.

    from pipeline.data import load_dataset, DATASETS, build_messages, render_chat
    df = load_dataset("maqa_bundled", limit=10)          # DataFrame in pipeline.artifacts.schema.DATASET
    msgs = build_messages("answer_list", df.iloc[0])  # a task's `prompt`

Importing this package is cheap: `datasets` is imported only when a real dataset is loaded,
pandas only inside `load_dataset`.
"""

from pipeline.data.catalog import (
    DATASETS,
    LOADERS,
    DatasetSpec,
    get_spec,
    load_dataset,
    register_dataset,
    spec_for,
    subset_indices,
)
from pipeline.data.loaders import BUNDLED_DIR, DatasetUnavailableError
from pipeline.data.prompts import (
    EXTRACTION_PROMPTS,
    SET_EXTRACTION_PROMPT,
    SIMPLEX_EXTRACTION_PROMPT,
    TASK_PROMPTS,
    build_messages,
    fill_extraction_prompt,
    ptrue_prompt,
    render_chat,
    set_extraction_prompt,
    simplex_extraction_prompt,
    task_prompt,
)
from pipeline.data.records import DatasetFormatError, validate_records

__all__ = [
    "BUNDLED_DIR",
    "DATASETS",
    "EXTRACTION_PROMPTS",
    "SET_EXTRACTION_PROMPT",
    "SIMPLEX_EXTRACTION_PROMPT",
    "TASK_PROMPTS",
    "DatasetFormatError",
    "DatasetSpec",
    "DatasetUnavailableError",
    "build_messages",
    "LOADERS",
    "spec_for",
    "fill_extraction_prompt",
    "get_spec",
    "load_dataset",
    "ptrue_prompt",
    "register_dataset",
    "render_chat",
    "set_extraction_prompt",
    "simplex_extraction_prompt",
    "subset_indices",
    "task_prompt",
    "validate_records",
]
