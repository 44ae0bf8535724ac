"""The three g_T readers share one base (issue 39): fields, checks and counting."""

import dataclasses

import pytest

from pipeline.mapping.extractor import LocalModelExtractor, ResponseExtractor
from pipeline.tasks.graphs.reading import GraphExtractor
from pipeline.tasks.sets.reading import SetExtractor
from pipeline.tasks.simplex.reading import SimplexMapper

READERS = [SetExtractor, GraphExtractor, SimplexMapper]


@pytest.mark.parametrize("cls", READERS)
def test_readers_share_the_base(cls):
    assert issubclass(cls, ResponseExtractor)
    names = {f.name for f in dataclasses.fields(cls)}
    assert {"method", "client", "equivalence", "n_failures", "n_responses"} <= names
    reader = cls()
    assert (reader.method, reader.client, reader.n_failures, reader.n_responses) == (
        "rule",
        None,
        0,
        0,
    )


def test_local_readers_share_the_backend():
    assert issubclass(SetExtractor, LocalModelExtractor)
    assert issubclass(GraphExtractor, LocalModelExtractor)
    assert not issubclass(SimplexMapper, LocalModelExtractor)
    assert SetExtractor().max_new_tokens == 64
    assert GraphExtractor().max_new_tokens == 128


@pytest.mark.parametrize(
    "cls, methods",
    [
        (SetExtractor, "('rule', 'llm', 'local')"),
        (GraphExtractor, "('rule', 'kggen', 'local', 'llm')"),
        (SimplexMapper, "('rule', 'llm')"),
    ],
)
def test_unknown_method_is_named(cls, methods):
    with pytest.raises(ValueError) as err:
        cls(method="gpt")
    assert str(err.value) == f"{cls.__name__}.method must be one of {methods} (got 'gpt')"


@pytest.mark.parametrize("cls", READERS)
def test_llm_without_client_is_named(cls):
    with pytest.raises(ValueError) as err:
        cls(method="llm")
    assert str(err.value) == f"{cls.__name__}(method='llm') needs client=LLMClient(...)"


@pytest.mark.parametrize("cls", [SetExtractor, GraphExtractor])
def test_local_without_backend_is_named(cls):
    with pytest.raises(ValueError) as err:
        cls(method="local")
    assert str(err.value) == (
        f"{cls.__name__}(method='local') needs backend=<a generation backend> "
        "(the cell's model: task.extractor.kind=local)"
    )


def test_local_is_not_a_simplex_method():
    with pytest.raises(ValueError) as err:
        SimplexMapper(method="local")
    assert str(err.value) == "SimplexMapper.method must be one of ('rule', 'llm') (got 'local')"


@pytest.mark.parametrize(
    "read",
    [
        lambda: SetExtractor().extract(["q"], ["a", "b"]),
        lambda: SimplexMapper().parse(["q"], ["a", "b"]),
    ],
)
def test_one_question_per_response(read):
    with pytest.raises(ValueError) as err:
        read()
    assert str(err.value) == "got 1 questions for 2 responses; pass one question per response"


class _Client:
    def __init__(self, outputs):
        self.outputs = outputs
        self.prompts = []

    def complete(self, prompts):
        self.prompts += prompts
        return self.outputs[: len(prompts)]


@pytest.mark.parametrize(
    "reader, read, outputs",
    [
        (
            lambda c: SetExtractor(method="llm", client=c),
            lambda r: r.extract(["q", "q"], ["Paris", "x"]),
            ["Paris", None],
        ),
        (
            lambda c: GraphExtractor(method="llm", client=c),
            lambda r: r.extract(["a text", "b text"]),
            ["Marie Curie | won | Nobel Prize", None],
        ),
        (
            lambda c: SimplexMapper(method="llm", client=c),
            lambda r: r.parse(["q", "q"], ["a", "b"]),
            ['{"Paris": 0.9, "Lyon": 0.1}', None],
        ),
    ],
)
def test_llm_outputs_are_counted(reader, read, outputs):
    client = _Client(outputs)
    r = reader(client)
    out = read(r)
    assert len(client.prompts) == 2
    assert out[0] is not None and out[1] is None
    assert (r.n_responses, r.n_failures) == (2, 1)
    read(r)
    assert (r.n_responses, r.n_failures) == (4, 2)
