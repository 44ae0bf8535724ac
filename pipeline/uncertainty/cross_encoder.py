"""lm-polygraph's default similarity for SAR and CoCoA: a cross-encoder scoring a text pair
jointly (cross-encoder/stsb-roberta-large, sentence-transformers' CrossEncoder, outputs in
[0, 1]). The bi-encoder cosine of the project's embedder is the offline stand-in (none of the
cross-encoders ships on PyPI); `uq.groups.lm_polygraph.similarity` chooses."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class CrossEncoderSimilarity:
    """`score_pairs([(a, b), ...])` -> similarity per pair; each distinct pair scored once."""

    def __init__(
        self, model: str, device: str = "cpu", batch_size: int = 32, revision: str | None = None
    ) -> None:
        self.model_name, self.device, self.batch_size = model, device, batch_size
        self.revision = revision  # a hub revision (None: the latest commit)
        self._model = None
        self._cache: dict[tuple[str, str], float] = {}

    def _load(self):
        if self._model is None:
            from sentence_transformers import CrossEncoder

            pinned = {} if self.revision is None else {"revision": self.revision}
            self._model = CrossEncoder(self.model_name, device=self.device, **pinned)
        return self._model

    def revision_entry(self) -> dict:
        """The checkpoint for the manifests: the hub commit loaded, or the local folder."""
        from pipeline.runtime.revisions import checkpoint_entry, loaded_commit

        loaded = loaded_commit(self._model) if self._model is not None else None
        return checkpoint_entry(self.model_name, self.revision, loaded=loaded)

    @property
    def max_tokens(self) -> int:
        # both texts of a pair share the model's length: each may take half of it
        return int(self._load().tokenizer.model_max_length) // 2 - 2

    def count_tokens(self, text: str) -> int:
        return len(self._load().tokenizer(text, add_special_tokens=False)["input_ids"])

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        todo = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        if todo:
            scores = self._load().predict(todo, batch_size=self.batch_size, show_progress_bar=False)
            self._cache.update(zip(todo, map(float, np.asarray(scores).reshape(-1))))
        return np.array([self._cache[p] for p in pairs], dtype=np.float64)
