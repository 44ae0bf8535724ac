"""What the tasks' g_T readers share (`SetExtractor`, `GraphExtractor`, `SimplexMapper`).

`ResponseExtractor` holds the method, the `LLMClient`, the cross-sample equivalence and the
counts of responses and parse failures, checks the method against the class's `METHODS` (and
that "llm" has a client), and sends extraction prompts to the client. `LocalModelExtractor`
adds the local generation backend ("local": greedy decoding, built on first use). What a
response is read into, and how, stays with each task's reader.

`extraction_prompt` fills the paper's extraction prompts (`pipeline.data.prompts`), and
`EXTRACTIONS` says, by the name a Mapper declares as its `extraction`, what a g_T asks outside
models with task.extractor.kind=llm: each task registers its own beside its mapper (task.py),
and `stage=plan` and the doctor read it from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pipeline.components.registry import Registry
from pipeline.data import prompts
from pipeline.mapping.labels import EquivalenceFn
from pipeline.text.normal_forms import clean_text

__all__ = [
    "EXTRACTIONS",
    "EquivalenceFn",
    "Extraction",
    "LocalModelExtractor",
    "ResponseExtractor",
    "extraction_prompt",
]


def extraction_prompt(kind: str, question: object, answer: object, **options: str) -> str:
    """The paper's g_T extraction prompt ("answer_set" or "answer_distribution") filled with
    question and answer; `options` go to its filler (the simplex one's `example`).

    The prompt text lives in `pipeline.data.prompts` (one copy for the whole project).
    """
    fill = {
        "answer_set": prompts.set_extraction_prompt,
        "answer_distribution": prompts.simplex_extraction_prompt,
    }.get(kind)
    if fill is None:
        raise ValueError(
            f"unknown extraction prompt kind {kind!r}; expected 'answer_set' or "
            "'answer_distribution'"
        )
    return fill(clean_text(question).strip(), clean_text(answer).strip(), **options)


@dataclass(frozen=True)
class Extraction:
    """What a g_T asks outside models per response with task.extractor.kind=llm, registered in
    `EXTRACTIONS` under the name its Mapper declares as `extraction`.

    `prompt(question, response)` is the prompt it sends (the plan counts the distinct ones and
    the cached ones); None where the extractor writes its own prompts, and then each response
    costs about `calls` calls, counted as such under `label`. `environment(extractor)` (given
    task.extractor) is the interpreter the extractor runs under, where it needs one of its own:
    the doctor checks that it exists (`environment_fix` says how to make it)."""

    prompt: Callable[[str, str], str] | None = None
    calls: int = 1
    label: str = ""
    environment: Callable[[Any], str] | None = None
    environment_fix: str = ""


EXTRACTIONS: Registry[Extraction] = Registry("extraction", discover=("pipeline.tasks.*.task",))


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
            raise ValueError(
                f"got {len(questions)} questions for {len(texts)} responses; pass one question per response"
            )

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
            raise ValueError(
                f"{type(self).__name__}(method='local') needs backend=<a generation "
                "backend> (the cell's model: task.extractor.kind=local)"
            )

    def _complete(self, prompts: list[str]) -> list[str | None]:
        """The extraction prompts' raw outputs: through the client ("llm") or the local backend
        (each prompt as one user turn, greedy decoding)."""
        if self.method == "llm":
            return self.client.complete(prompts)
        backend = self.backend
        rendered = [backend.render_chat([{"role": "user", "content": p}]) for p in prompts]
        return [g.text for g in backend.greedy(rendered, self.max_new_tokens)]
