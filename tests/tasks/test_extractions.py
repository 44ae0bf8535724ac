"""What a g_T asks outside models is registered by its task (`EXTRACTIONS`, beside its Mapper):
`stage=plan` and the doctor read it there instead of importing a task folder."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.data import prompts
from pipeline.mapping.extractor import EXTRACTIONS, extraction_prompt
from pipeline.tasks.contract import MAPPERS


def test_every_declared_extraction_is_registered():
    declared = {MAPPERS[m].extraction for m in MAPPERS.names()} - {None}
    assert declared == {"answer_set", "answer_distribution", "kggen"}
    assert declared <= set(EXTRACTIONS.names())


def test_the_prompted_extractions_send_the_papers_prompts():
    q, a = "Which oceans border the USA?", "The Pacific\u200b and the Atlantic."
    assert (
        EXTRACTIONS["answer_set"].prompt(q, a)
        == extraction_prompt("answer_set", q, a)
        == prompts.set_extraction_prompt(q, "The Pacific and the Atlantic.")
    )
    assert EXTRACTIONS["answer_distribution"].prompt(q, a) == prompts.simplex_extraction_prompt(
        q, "The Pacific and the Atlantic."
    )  # the restored example, as the plan counted it


def test_kggen_writes_its_own_prompts_in_its_own_environment(monkeypatch, tmp_path):
    kggen = EXTRACTIONS["kggen"]
    assert (kggen.prompt, kggen.calls, kggen.label) == (None, 2, "KGGen")
    assert kggen.environment_fix == "make kggen-env"
    monkeypatch.setenv("KGGEN_PYTHON", str(tmp_path / "python"))
    assert kggen.environment(SimpleNamespace(kggen_python=None)) == str(tmp_path / "python")
    assert kggen.environment(SimpleNamespace(kggen_python="/opt/kg/python")) == "/opt/kg/python"
