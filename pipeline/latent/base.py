"""Shared pieces of every latent space: the result type, weight handling, the registry.

Conventions used by every space (docs/design.md s3):
- ``latents`` is a non-empty sequence of latent values (one per parseable sample).
- ``weights`` (optional) are non-negative finite numbers, one per latent, not all zero; they are
  normalised internally, so sample probabilities, counts or ``None`` (uniform) all work.
  A sample with weight 0 is treated exactly as if it were absent (it is neither counted nor a
  candidate for ``sample_mbr``/``map``), so integer weights behave like repeated samples.
- ``distance(a, b)``: ``a`` is the reference/sample side, ``b`` the candidate/action side.
  This only matters for the asymmetric losses (F-beta: ``1 - F_beta(truth=a, prediction=b)``,
  simplex: ``KL(a || b)``); the empirical risk is ``risk(b, latents) = E_l[distance(l, b)]``.
- Ties are broken towards the first seen candidate; two risks count as tied when they differ by
  at most ``TIE_TOLERANCE`` (relative), so floating-point noise cannot reorder exact ties.
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from pipeline.components.registry import Registry
from pipeline.runtime.errors import ConfigError

TIE_TOLERANCE = 1e-12

L = TypeVar("L")  # canonical latent type of a space


class LatentTypeError(ValueError, TypeError):
    """A latent (or weight) of the wrong type; a ValueError like every other bad-input error."""


class RiskOverflowError(ValueError):
    """A risk whose true value exceeds the largest float (reals far past float range); `rows`:
    the prompts (positions in the batch, [0] for one prompt) it happened in. Any space may
    raise it; the decide stage gives those prompts no decision instead of an infinite risk."""

    def __init__(self, message: str, rows: Sequence[int] = (0,)) -> None:
        super().__init__(message)
        self.rows = [int(r) for r in rows]


@dataclass(frozen=True)
class BayesResult:
    """A decision and its empirical Bayes risk ``E_l[d(l, action)]`` under the samples."""

    action: Any
    risk: float


def validate_weights(weights: Sequence[float] | np.ndarray | None, n: int) -> np.ndarray:
    """Return the raw (unnormalised) weights as float64, checked.

    Raw weights are kept so that integer counts stay exact; divide by their sum to normalise.
    """
    if weights is None:
        return np.ones(n, dtype=np.float64)
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"weights must be numbers, got {weights!r}") from exc
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(
            f"weights must be a 1-D sequence with one weight per latent ({n}), got shape {w.shape}"
        )
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite (no NaN or inf); drop or fix those samples")
    if np.any(w < 0):
        raise ValueError(f"weights must be non-negative, got min {w.min()!r}")
    if not np.any(w > 0):
        raise ValueError("weights must not all be zero: at least one sample needs positive weight")
    return w


def normalise_weights(weights: Sequence[float] | np.ndarray | None, n: int) -> np.ndarray:
    """Validated weights scaled to sum to one."""
    w = validate_weights(weights, n)
    return w / w.sum()


def validate_batch_weights(
    weights: np.ndarray | None, n_prompts: int, n_samples: int
) -> np.ndarray | None:
    """Check a (prompts, samples) weight matrix; ``None`` stays ``None`` (uniform)."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n_prompts, n_samples):
        raise ValueError(
            f"weights must have shape (prompts, samples)={(n_prompts, n_samples)}, got {w.shape}"
        )
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite (no NaN or inf)")
    if np.any(w < 0):
        raise ValueError("weights must be non-negative")
    empty = np.flatnonzero(~np.any(w > 0, axis=1))
    if empty.size:
        raise ValueError(
            f"every prompt needs a positive weight; all-zero weight rows at prompts {empty[:10].tolist()}"
        )
    return w


def as_latent_list(latents: Sequence[Any] | np.ndarray) -> list[Any]:
    """The latents as a list; an empty input is an error (there is nothing to decide on)."""
    if latents is None:
        raise ValueError("latents must be a non-empty sequence, got None")
    items = list(latents)
    if not items:
        raise ValueError(
            "latents is empty: Bayes decisions need at least one parseable sample "
            "(record the prompt as undecidable instead of calling the latent space)"
        )
    return items


def first_min_index(values: np.ndarray) -> int:
    """Index of the first value within ``TIE_TOLERANCE`` (relative) of the minimum."""
    values = np.asarray(values, dtype=np.float64)
    best = values.min()
    if np.isinf(best):  # all +inf (possible for KL): every candidate ties
        return int(np.argmax(values == best))
    return int(np.argmax(values <= best + TIE_TOLERANCE * max(1.0, abs(best))))


def first_min_index_rows(values: np.ndarray) -> np.ndarray:
    """Row-wise ``first_min_index`` for a (prompts, candidates) matrix."""
    best = values.min(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        slack = TIE_TOLERANCE * np.maximum(1.0, np.abs(best))
        slack = np.where(np.isinf(best), 0.0, slack)
    return np.argmax(values <= best + slack, axis=1)


def sorted_labels(labels: set[Hashable] | frozenset[Hashable]) -> list[Hashable]:
    """A deterministic order for labels (sorted; mixed types by type name then repr).

    Sets iterate in hash order, which changes with PYTHONHASHSEED; sorting keeps tie-breaking and
    JSON output reproducible across runs.
    """
    try:
        return sorted(labels)
    except TypeError:
        return sorted(labels, key=lambda x: (type(x).__name__, repr(x)))


class LatentSpace(abc.ABC, Generic[L]):
    """A latent space (L, d) with closed-form Bayes action and empirical risks.

    Subclasses implement ``canonical`` (validate and normalise one latent), ``key`` (hashable
    identity for ``map``), ``distance``, ``_bayes``, ``_risk`` and ``_pairwise_distances``.
    """

    name: ClassVar[str] = ""
    #: constructor options that change a latent's canonical (stored) form, so the map stage's
    #: cache key holds them (e.g. undirected graph edges); the other options change only the loss
    canonical_options: ClassVar[tuple[str, ...]] = ()

    # --- per-space hooks -------------------------------------------------------------------
    @abc.abstractmethod
    def canonical(self, latent: Any) -> L:
        """Validate one latent and return it in the space's canonical form."""

    def key(self, latent: L) -> Hashable:
        """Hashable identity of a canonical latent (two latents are equal iff keys are)."""
        return latent  # type: ignore[return-value]

    @abc.abstractmethod
    def distance(self, a: Any, b: Any) -> float:
        """d_T(a, b) >= 0 with ``a`` the reference/sample and ``b`` the candidate."""

    @abc.abstractmethod
    def _bayes(self, items: list[L], w: np.ndarray) -> BayesResult:
        """Closed-form Bayes action and risk; ``w`` raw positive weights."""

    @abc.abstractmethod
    def _risk(self, action: L, items: list[L], w: np.ndarray) -> float:
        """Empirical risk of a canonical action; ``w`` raw positive weights."""

    @abc.abstractmethod
    def _pairwise_distances(self, items: list[L]) -> np.ndarray:
        """Matrix D[i, j] = d(items[i], items[j]) (row = reference, column = candidate)."""

    # --- public API --------------------------------------------------------------------------
    def _prepare(self, latents: Sequence[Any], weights: Any) -> tuple[list[L], np.ndarray]:
        items = as_latent_list(latents)
        w = validate_weights(weights, len(items))
        canon = [self.canonical(x) for x in items]
        self._check_compatible(canon)
        keep = w > 0  # a zero weight removes the sample (weights == repeated samples)
        if not np.all(keep):
            canon = [c for c, k in zip(canon, keep) if k]
            w = w[keep]
        return canon, w

    def _check_compatible(self, items: list[L]) -> None:
        """Hook: cross-latent checks (e.g. equal dimensions)."""

    def bayes(self, latents: Sequence[Any], weights: Any = None) -> BayesResult:
        """Bayes-optimal action argmin_a E_l[d(l, a)] and its risk, in closed form."""
        items, w = self._prepare(latents, weights)
        return self._bayes(items, w)

    def risk(self, action: Any, latents: Sequence[Any], weights: Any = None) -> float:
        """Empirical risk E_l[d(l, action)] under the (weighted) samples."""
        items, w = self._prepare(latents, weights)
        return float(self._risk(self.canonical(action), items, w))

    def map(self, latents: Sequence[Any], weights: Any = None) -> L:
        """l_MAP: the most frequent (highest total weight) latent; ties go to the first seen."""
        items, w = self._prepare(latents, weights)
        totals: dict[Hashable, float] = {}
        first: dict[Hashable, L] = {}
        for item, wi in zip(items, w):
            k = self.key(item)
            if k not in totals:
                totals[k] = 0.0
                first[k] = item
            totals[k] += float(wi)
        keys = list(totals)  # insertion order == first seen
        mass = np.array([totals[k] for k in keys])
        return first[keys[first_min_index(-mass)]]

    def sample_mbr(self, latents: Sequence[Any], weights: Any = None) -> BayesResult:
        """l_Sample: the sample with the least empirical risk (pairwise, O(M^2)); ties: first."""
        items, w = self._prepare(latents, weights)
        dist = self._pairwise_distances(items)
        with np.errstate(invalid="ignore"):
            risks = (w @ dist) / w.sum()
        best = first_min_index(risks)
        return BayesResult(items[best], float(risks[best]))

    def batch(self, prompts: Sequence[Sequence[Any]]) -> LatentBatch:
        """Many prompts' samples (uniform weights within a prompt) for deciding them together;
        a space with an array form returns its own subclass."""
        return LatentBatch(self, prompts)

    # --- how latents are stored and shown (each space owns its JSON form and its text) -------
    #: True when a decision's text is written from the latent itself (g_T^-1: sets, graphs) for
    #: every method, so text metrics compare like with like; False: the text of a sample.
    renders_latent: ClassVar[bool] = False

    def encode(self, latent: L) -> Any:
        """JSON-ready payload of one canonical latent (the artifacts' `latent`/`action` columns)."""
        return json_scalar(latent, f"{self.name} latent")

    def decode(self, payload: Any) -> L:
        """Inverse of `encode` for a decoded JSON payload."""
        if isinstance(payload, (list, dict)):
            raise ValueError(f"{self.name}: expected a JSON scalar, got {payload!r:.200}")
        return payload

    def to_json(self, latent: Any) -> str:
        """The latent as a JSON string (``None`` -> ``"null"``); round trips are exact."""
        if latent is None:
            return "null"
        return json.dumps(self.encode(latent), sort_keys=True, allow_nan=False, ensure_ascii=False)

    def from_json(self, s: str) -> Any:
        """Decode `to_json`'s output (``"null"`` -> ``None``)."""
        try:
            payload = json.loads(s)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self.name}: not valid JSON: {s!r:.200}") from exc
        return None if payload is None else self.decode(payload)

    def describe(self, latent: Any, texts: Sequence[str] = ()) -> str:
        """A readable text for a latent no sample wrote verbatim (`texts`: the prompt's samples)."""
        return "" if latent is None else str(latent)

    def labels(self, latent: Any) -> list[str] | None:
        """The labels a latent is made of, for reading and auditing (a set's answers, a
        distribution's answers, a class's name); None for spaces without labels (vectors,
        numbers)."""
        return None

    # --- explanations (what the reader of one prompt sees) -----------------------------------
    def distribution(self, latents: Sequence[Any], weights: Any = None) -> dict[str, float] | None:
        """The latent distribution as labels with their frequencies, most frequent first: for
        each label, the (weighted) share of samples whose latent holds it (a class's share, an
        answer's or an edge's marginal p(y)); None for spaces without labels."""
        items, w = self._prepare(latents, weights)
        if not items or self.labels(items[0]) is None:
            return None
        totals: dict[str, float] = {}
        for item, wi in zip(items, w):
            for label in set(self.labels(item) or ()):
                totals[label] = totals.get(label, 0.0) + float(wi)
        total = float(w.sum())
        return dict(
            sorted(((k, v / total) for k, v in totals.items()), key=lambda kv: (-kv[1], kv[0]))
        )

    def max_risk(self, latents: Sequence[Any]) -> float:
        """The largest Bayes risk a prompt's samples can have: the space's bound where the risk
        is bounded, else the bound over sample sets on the same support (the answers, edges or
        values the samples use). NaN: no such bound. `confidence` falls back on it for a space
        without `agreement`."""
        return float("nan")

    def agreement(self, action: Any, latent: Any) -> float:
        """The task quality, in [0, 1], of answering `action` when `latent` is the truth (1 when
        they are the same): what `confidence` averages over the samples. NaN: the space defines
        none (then `confidence` is 1 - risk / max_risk)."""
        return float("nan")

    def confidence(self, latents: Sequence[Any], action: Any = None, weights: Any = None) -> float:
        """How far to trust `action` (default: the Bayes action): its expected task quality under
        the samples' latent distribution, sum_i w_i agreement(action, l_i), in [0, 1]: 1 when
        every sample is the action, low when samples scatter (an empty answer from scattered
        samples is not confident). A space without `agreement` gives 1 - risk / max_risk (NaN
        without a bound). NaN for no samples or no action (docs/score.md)."""
        items, w = self._prepare(latents, weights)
        if not items:
            return float("nan")
        action = self._bayes(items, w).action if action is None else self.canonical(action)
        if type(self).agreement is not LatentSpace.agreement:
            quality = np.array([self.agreement(action, x) for x in items], dtype=np.float64)
            return float(min(1.0, max(0.0, float(w @ quality) / float(w.sum()))))
        risk, bound = float(self._risk(action, items, w)), self.max_risk(items)
        if not np.isfinite(risk) or np.isnan(bound):
            return float("nan")
        if bound <= 0:
            return 1.0
        return float(min(1.0, max(0.0, 1.0 - risk / bound)))

    def no_answer(self) -> Any:
        """The latent of "no answer": what a sample g_T could not read counts as under
        reading.unreadable=no_answer (docs/score.md), and the action that abstains. None: the
        space has no such outcome (sphere, simplex, reals), so unread samples are dropped."""
        return None

    def answer_text(self, action: Any, texts: Sequence[str]) -> str | None:
        """The answer a decision names, as the samples write it, where it differs from the text
        `render` gives (a class's label "Paris" beside its member's sentence "The capital of
        France is Paris."); None: the rendered text is the answer."""
        return None

    def render(self, action: Any, samples: Sequence[tuple[Any, str]]) -> str:
        """The text of a decision, given the prompt's parseable (latent, text) samples: the
        latent written out when `renders_latent`, else the most frequent text among the
        samples whose latent is the action (texts compared without case, spacing and final
        punctuation; ties: first seen), so the printed answer is the one most of that cluster
        gives; else `describe(action)`."""
        if action is None:
            return ""
        texts = [t for _, t in samples]
        if self.renders_latent:
            return self.describe(action, texts)
        key = self.key(self.canonical(action))
        counts: dict[str, list] = {}  # normalised text -> [count, first text]; insertion order
        for latent, text in samples:
            if self.key(self.canonical(latent)) == key:
                norm = " ".join(str(text).casefold().split()).rstrip(" .!?")
                counts.setdefault(norm, [0, text])[0] += 1
        if counts:
            return max(counts.values(), key=lambda c: c[0])[1]
        return self.describe(action, texts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# Padded batches are processed in chunks of about this many cells (prompts x samples x width),
# so a chunk's float64 temporaries stay near 16 MB however wide one prompt's labels are.
CHUNK_CELLS = 1 << 21


def padded_chunks(
    widths: np.ndarray, n_samples: int, budget: int | None = None, square: bool = False
) -> list[tuple[slice, int]]:
    """Consecutive prompt slices whose padded (prompts, n_samples, width) array stays within
    `budget` cells, each with its width (the widest prompt in it, at least 1). `square`: the
    work also holds a (prompts, width, width) array (F-beta's GFM)."""
    budget = CHUNK_CELLS if budget is None else budget
    out: list[tuple[slice, int]] = []
    start, width = 0, 1
    for p, k in enumerate(np.asarray(widths, dtype=np.int64).tolist()):
        wider = max(width, k, 1)
        rows = max(n_samples, wider) if square else n_samples
        if p > start and (p - start + 1) * rows * wider > budget:
            out.append((slice(start, p), width))
            start, wider = p, max(k, 1)
        width = wider
    if start < len(widths):
        out.append((slice(start, len(widths)), width))
    return out


class LatentBatch:
    """Many prompts' samples in one latent space, each prompt's samples weighted uniformly: the
    decide stage's Bayes actions, l_MAP, l_Sample and empirical risks for a whole cell at once.

    This base form loops over the prompts with the one-prompt maths; spaces with an array form
    (sets, graphs, F-beta sets, classes, sphere, simplex, reals) override the loops with padded
    array code. Every prompt needs at least one sample.
    """

    def __init__(self, space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> None:
        self.space = space
        self.items: list[list[Any]] = self._checked_items(space, prompts)
        self.sizes = np.array([len(p) for p in self.items], dtype=np.int64)
        self.n_samples = int(self.sizes.max(initial=0))  # the padded width of every prompt
        self._sample_risks: list[np.ndarray] | None = None

    @staticmethod
    def _checked_items(space: LatentSpace, prompts: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """Each prompt's samples validated and in the space's canonical form."""
        return [space._prepare(p, None)[0] for p in prompts]

    def __len__(self) -> int:
        return len(self.items)

    def bayes(self) -> tuple[list[Any], np.ndarray]:
        """(Bayes action, Bayes risk) of every prompt."""
        res = [self.space._bayes(items, np.ones(len(items))) for items in self.items]
        return [r.action for r in res], np.array([r.risk for r in res], dtype=np.float64)

    def risk(self, actions: Sequence[Any]) -> np.ndarray:
        """Empirical risk of one action per prompt (NaN where the action is None)."""
        out = np.full(len(self.items), np.nan)
        for p, (action, items) in enumerate(zip(actions, self.items)):
            if action is not None:
                out[p] = self.space._risk(self.space.canonical(action), items, np.ones(len(items)))
        return out

    def _compute_sample_risks(self) -> list[np.ndarray]:
        out = []
        for items in self.items:
            with np.errstate(invalid="ignore"):
                out.append(self.space._pairwise_distances(items).mean(axis=0))
        return out

    def sample_risks(self) -> list[np.ndarray]:
        """Per prompt, the empirical risk of each of its samples as the action (computed once)."""
        if self._sample_risks is None:
            self._sample_risks = self._compute_sample_risks()
        return self._sample_risks

    def sample_mbr(self) -> tuple[np.ndarray, np.ndarray]:
        """l_Sample of every prompt: (index of the chosen sample, its risk); ties: first."""
        risks = self.sample_risks()
        idx = np.array([first_min_index(r) for r in risks], dtype=np.int64)
        return idx, np.array([r[i] for r, i in zip(risks, idx)], dtype=np.float64)

    def map(self) -> np.ndarray:
        """l_MAP of every prompt: the index of the first sample of its most frequent latent.

        Keys are coded per prompt in first-seen order, so the lowest code among the most
        frequent is the first seen (the one-prompt `map`'s tie rule)."""
        if not self.items:
            return np.zeros(0, dtype=np.int64)
        codes, first_sample, starts = [], [], []
        for items in self.items:
            starts.append(len(first_sample))
            seen: dict[Hashable, int] = {}
            for i, item in enumerate(items):
                code = seen.get(key := self.space.key(item))
                if code is None:
                    code = seen[key] = len(first_sample)
                    first_sample.append(i)
                codes.append(code)
        counts = np.bincount(np.asarray(codes, dtype=np.int64), minlength=len(first_sample))
        starts_arr = np.asarray(starts, dtype=np.int64)
        best = np.maximum.reduceat(counts, starts_arr)
        seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts_arr, len(first_sample))))
        top = np.flatnonzero(counts == best[seg])
        winner = top[np.searchsorted(seg[top], np.arange(len(starts)))]
        return np.asarray(first_sample, dtype=np.int64)[winner]

    def weights(self, sl: slice) -> np.ndarray:
        """(prompts, n_samples) 0/1 weights of the prompts in `sl`: 1 for a prompt's samples, 0
        for the padding."""
        return (np.arange(self.n_samples)[None, :] < self.sizes[sl, None]).astype(np.float64)


_SCALARS = (str, int, float, bool)


def json_scalar(value: Any, what: str) -> Any:
    """A JSON scalar (numpy scalars unwrapped); anything else is a LatentTypeError."""
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, _SCALARS):
        raise LatentTypeError(
            f"{what} must be a JSON scalar (str, int, float, bool), got {type(value).__name__} {value!r}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return value


S = TypeVar("S", bound=type[LatentSpace])

# the built-in spaces live in their task folders (pipeline/tasks/<name>/space.py)
SPACES: Registry[type[LatentSpace]] = Registry("latent space", discover=("pipeline.tasks.*.space",))


def register(name: str) -> Callable[[S], S]:
    """Class decorator: make a latent space available as ``get_space(name)``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"latent space name must be a non-empty string, got {name!r}")

    def deco(cls: S) -> S:
        if not (isinstance(cls, type) and issubclass(cls, LatentSpace)):
            raise TypeError(f"@register({name!r}) needs a LatentSpace subclass, got {cls!r}")
        existing = SPACES.registered_so_far(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(
                f"latent space name {name!r} is already registered to {existing.__name__}"
            )
        SPACES.add(name, cls, replace=True)  # the same class again: a module reloaded
        if not cls.__dict__.get("name"):
            cls.name = name
        return cls

    return deco


def available_spaces() -> list[str]:
    """Registered latent space names, sorted."""
    return list(SPACES.names())


def space_class(name: str) -> type[LatentSpace]:
    """The registered latent space class `name` (a ConfigError, a ValueError, lists the names)."""
    if not isinstance(name, str) or name not in SPACES:
        raise ConfigError(
            f"unknown latent space {name!r}; valid names: {', '.join(available_spaces())}"
        )
    return SPACES[name]


def get_space(name: str, **kwargs: Any) -> LatentSpace:
    """Instantiate a registered latent space by name, e.g. ``get_space("sets-fbeta", beta=2)``."""
    return space_class(name)(**kwargs)


def reject_none(latent: Any, space: str) -> None:
    """Unparseable samples are represented as None upstream; they must be dropped before."""
    if latent is None:
        raise ValueError(
            f"{space}: got None as a latent; drop unparseable samples (parse_ok=False) before deciding"
        )
