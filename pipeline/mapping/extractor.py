"""What the tasks' g_T readers share (`SetExtractor`, `GraphExtractor`, `SimplexMapper`).

`ResponseExtractor` holds the method, the `LLMClient`, the cross-sample equivalence and the
counts of responses and parse failures, checks the method against the class's `METHODS` (and
that "llm" has a client), and sends extraction prompts to the client. `LocalModelExtractor`
adds the local generation backend ("local": greedy decoding, built on first use). What a
response is read into, and how, stays with each task's reader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["EquivalenceFn", "LocalModelExtractor", "ResponseExtractor"]

# (question, labels) -> one cluster id per label; the equivalence engineer's `cluster` fits.
EquivalenceFn = Callable[[str, list[str]], Sequence[int]]


@dataclass
class ResponseExtractor:
    """Base of the readers that map many responses at once, with counts of parse failures.

    Args:
        method: one of the class's `METHODS`.
        client: an `LLMClient` (method "llm").
        equivalence: optional `(context, labels) -> cluster ids` for merging across samples.
        n_failures, n_responses: responses that could not be read, and all responses read.
    """

    METHODS: ClassVar[tuple[str, ...]] = ("rule", "llm")

    method: str = "rule"
    client: Any = None
    equivalence: EquivalenceFn | None = None
    n_failures: int = 0
    n_responses: int = 0

    def __post_init__(self) -> None:
        name = type(self).__name__
        if self.method not in self.METHODS:
            raise ValueError(f"{name}.method must be one of {self.METHODS} (got {self.method!r})")
        if self.method == "llm" and self.client is None:
            raise ValueError(f"{name}(method='llm') needs client=LLMClient(...)")

    @staticmethod
    def _check_pairs(questions: Sequence[object], texts: Sequence[object]) -> None:
        if len(questions) != len(texts):
            raise ValueError(f"got {len(questions)} questions for {len(texts)} responses; pass one question per response")

    def _complete(self, prompts: list[str]) -> list[str | None]:
        """The extraction prompts' raw outputs (method "llm": through the client)."""
        return self.client.complete(prompts)

    def _counted(self, out: list[Any]) -> list[Any]:
        """`out` (one reading per response, None = parse failure), added to the counts."""
        self.n_responses += len(out)
        self.n_failures += sum(o is None for o in out)
        return out


@dataclass
class LocalModelExtractor(ResponseExtractor):
    """A `ResponseExtractor` that can also send its prompts to a local generation backend.

    Args:
        backend: a built generation backend (method "local"; the map stage hands the cell's own
            through MapContext.local_backend, so this layer imports no generation code).
        max_new_tokens: decode budget of the local extractor.
    """

    METHODS: ClassVar[tuple[str, ...]] = ("rule", "llm", "local")

    backend: Any = None
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method == "local" and self.backend is None:
            raise ValueError(f"{type(self).__name__}(method='local') needs backend=<a generation "
                             "backend> (the cell's model: task.extractor.kind=local)")

    def _complete(self, prompts: list[str]) -> list[str | None]:
        """The extraction prompts' raw outputs: through the client ("llm") or the local backend
        (each prompt as one user turn, greedy decoding)."""
        if self.method == "llm":
            return self.client.complete(prompts)
        backend = self.backend
        rendered = [backend.render_chat([{"role": "user", "content": p}]) for p in prompts]
        return [g.text for g in backend.greedy(rendered, self.max_new_tokens)]
