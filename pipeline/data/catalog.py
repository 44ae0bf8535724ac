"""Dataset registry and the one public entry point `load_dataset`.

A dataset is one registration: `register_dataset(DatasetSpec(name, reference, loader, defaults))`,
or one config file naming a registered loader (`loader: bundled` with the file in `overrides`).
`load_dataset(name, limit=..., seed=..., **overrides)` merges the overrides into the spec's
defaults (unknown keys are an error), loads, converts and validates, and returns a pandas
DataFrame with exactly the columns of `pipeline.artifacts.schema.DATASET`.

Subsets: `limit=N` keeps the first N rows in the source's order; with `shuffle=True` the rows
are first permuted by `numpy.random.default_rng(seed).permutation(n)` (so `seed` matters only
together with `shuffle`). The same (limit, seed, shuffle) always gives the same rows, and prompt
ids come from the source (its id or row index), so they do not depend on the subset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pipeline.components.registry import Registry
from pipeline.data import loaders as L
from pipeline.data.records import COLUMNS, validate_records

Loader = Callable[..., list[dict[str, Any]]]


@dataclass(frozen=True, eq=False)  # identity hash: defaults is a mapping
class DatasetSpec:
    """How to load one dataset and which kind of reference its records carry."""

    name: str
    reference: str  # reference kind (pipeline.tasks.REFERENCES): what every record is checked for
    loader: Loader  # loader(spec, select, **options) -> list of DATASET records
    defaults: Mapping[str, Any] = field(default_factory=dict)
    offline_alternative: str | None = None  # bundled config to suggest when this one can't load
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))


DATASETS: Registry[DatasetSpec] = Registry("dataset")
# Loaders a dataset config can name (`dataset.loader`) to be read without a Python registration.
LOADERS: Registry[tuple[Loader, Mapping[str, Any]]] = Registry("dataset loader")


def register_dataset(spec: DatasetSpec, *, replace: bool = False) -> DatasetSpec:
    """Add a dataset config; `replace=True` to overwrite an existing name."""
    return DATASETS.add(spec.name, spec, replace=replace)


def get_spec(name: str) -> DatasetSpec:
    """The registered spec for `name`, or a clear error listing the known names."""
    return DATASETS[name]


def spec_for(name: str, loader: str | None = None, reference: str | None = None) -> DatasetSpec:
    """The spec of dataset config `name`: its registration, or, with `loader`, a spec built
    from that registered loader (a dataset declared by its config file alone)."""
    if loader is None:
        return DATASETS[name]
    fn, defaults = LOADERS[loader]
    if reference is None:
        raise ValueError(
            f"dataset {name!r} with loader {loader!r} needs the reference kind its "
            "records carry (the task's `reference`)"
        )
    return DatasetSpec(name, reference, fn, defaults, description=f"{loader} loader")


def subset_indices(n: int, limit: int | None, seed: int = 0, shuffle: bool = False) -> list[int]:
    """Row indices kept: first `limit` of range(n), after a seeded permutation if `shuffle`."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    if shuffle:
        import numpy as np

        order = np.random.default_rng(seed).permutation(n).tolist()
    else:
        order = list(range(n))
    return order if limit is None else order[:limit]


def load_dataset(
    name: str,
    *,
    limit: int | None = None,
    seed: int = 0,
    shuffle: bool = False,
    loader: str | None = None,
    reference: str | None = None,
    **overrides: Any,
) -> Any:
    """Load dataset config `name` as a pandas DataFrame in the DATASET schema.

    `overrides` replace the spec's defaults (e.g. `split="test"`, `data_files="x.parquet"`,
    `path=...`); see `DATASETS[name].defaults` for the accepted keys. `loader` reads a dataset
    declared by its config alone with that registered loader; `reference` is the reference kind
    every record is checked for (default: the registration's).
    """
    import pandas as pd

    spec = spec_for(name, loader, reference)
    unknown = sorted(set(overrides) - set(spec.defaults))
    if unknown:
        raise TypeError(
            f"dataset {name!r} does not accept {unknown}; accepted options: {sorted(spec.defaults)}"
        )
    options = {**spec.defaults, **overrides}
    subset_indices(0, limit)  # validate limit before any download

    def select(n: int) -> list[int]:
        return subset_indices(n, limit, seed, shuffle)

    records = spec.loader(spec, select, **options)
    validate_records(records, reference=reference or spec.reference)
    return pd.DataFrame.from_records(records, columns=list(COLUMNS))


_HUB = {"data_files": None, "cache_dir": None, "revision": None}


def _register_hub(
    name: str,
    reference: str,
    loader: Loader,
    description: str,
    offline_alternative: str | None = None,
    **defaults: Any,
) -> None:
    """Register a hub dataset: its `defaults`, then the shared hub options (`_HUB`).

    Its offline alternative is the bundled stand-in `<name>_bundled` registered below.
    """
    register_dataset(
        DatasetSpec(
            name,
            reference,
            loader,
            {**defaults, **_HUB},
            offline_alternative=offline_alternative or f"{name}_bundled",
            description=description,
        )
    )


_register_hub(
    "triviaqa",
    "one_answer",
    L.load_triviaqa,
    "TriviaQA single-answer QA; aliases = answer.value + answer.aliases",
    path="mandarjoshi/trivia_qa",
    config="rc.nocontext",
    split="validation",
)
register_dataset(
    DatasetSpec(
        "maqa",
        "answer_set",
        L.load_maqa,
        {
            "path": None,
            "field": None,
            "question_field": "question",
            "answers_field": "answers",
            "data_files": None,
            "cache_dir": None,
            "sha256": None,  # the pinned file's hash (conf/dataset/maqa.yaml; make paper-assets)
            "commit": None,  # the repository commit that file came from (recorded)
        },
        offline_alternative="maqa_bundled",
        description="MAQA multi-answer QA (official repository JSON, 2,042 questions)",
    )
)
_register_hub(
    "maqa_star",
    "distribution",
    L.load_maqa_star,
    "MAQA* ambiguous QA with answer distributions p* (renormalised to sum to 1)",
    path="ttomov/maqa_star",
    config=None,
    split="train",
    question_field="question",
    answers_field="answers",
)
_register_hub(
    "wmt19_fien",
    "text",
    L.load_wmt19,
    "WMT19 Finnish -> English translation",
    path="wmt/wmt19",
    config="fi-en",
    split="validation",
    source_lang="fi",
    target_lang="en",
)
# Two sources (`source=`): "hub" (abisee/cnn_dailymail 3.0.0 test, the default of this Python
# registration) and "benchmark", the paper's CNN/DM-based benchmark of Zhang et al. 2023 in its
# released format (writer_summaries.json), which conf/dataset/cnn_dm.yaml selects.
_register_hub(
    "cnn_dm",
    "text",
    L.load_cnn_dm,
    "CNN/DailyMail summarization: source=hub (article -> highlights) or source=benchmark "
    "(Zhang et al. 2023 writer_summaries.json: 109 articles -> first freelance-writer summary)",
    source="hub",
    benchmark_file=None,
    path="abisee/cnn_dailymail",
    config="3.0.0",
    split="test",
    article_field="article",
    summary_field="highlights",
    id_field="id",
)

_register_hub(
    "gsm8k",
    "number",
    L.load_gsm8k,
    "GSM8K grade-school maths: the final answer after '####' as the numeric reference",
    offline_alternative="numeric_bundled",
    path="openai/gsm8k",
    config="main",
    split="test",
)

LOADERS.add("bundled", (L.load_bundled, {"path": None, "file": None}))

for _real, _reference in [
    ("triviaqa", "one_answer"),
    ("maqa", "answer_set"),
    ("maqa_star", "distribution"),
    ("wmt19_fien", "text"),
    ("cnn_dm", "text"),
]:
    register_dataset(
        DatasetSpec(
            f"{_real}_bundled",
            _reference,
            L.load_bundled,
            {"path": None, "file": f"{_real}_bundled.jsonl"},
            description=f"bundled offline stand-in for {_real} (our own text, CC-BY-4.0)",
        )
    )
