"""The generic layers name no task, latent space, decision method or UQ estimator: config.py,
the stages, the scorer, tracking and reporting loop over what the registries and the task
declare (pipeline.methods: OURS/BASELINE/F_BETA are the roles they compare; the estimators'
registry: labels, table order, the risk of a decision). A string literal in their code (not a
docstring) equal to a registered name fails here, naming file and line. Names that are also a
stage or an artifact ("map", "ptrue") mean the stage or artifact there, and are not counted.
Nor does the reporting name a dataset (conf/dataset/*.yaml, with or without "_bundled") outside
the paper's vocabulary, pipeline/reporting/paper.py (which dataset is which column, the labels,
the figure sets). The components (clients, evaluation, mapping, generation, uncertainty, the
auxiliary models) name no task, latent space or dataset."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.latent import available_spaces
from pipeline.methods import METHODS
from pipeline.schema import ARTIFACTS
from pipeline.stage import STAGES
from pipeline.tasks import task_folders
from pipeline.uncertainty.estimators import ESTIMATORS

ROOT = Path(__file__).resolve().parents[1]
GENERIC = ["pipeline/config.py", "pipeline/stages", "pipeline/scorer/run.py", "pipeline/scorer/readers.py",
           "pipeline/tracking", "pipeline/reporting"]
# the one reporting file that names the paper's datasets; the rest reads them from it
PAPER_VOCABULARY = "pipeline/reporting/paper.py"


def registered_names() -> dict[str, str]:
    names = {}
    names.update({task: "task" for task in task_folders()})
    names.update({s: "latent space" for s in available_spaces()})
    names.update({m: "decision method" for m in METHODS.names()})
    names.update({e: "UQ estimator" for e in ESTIMATORS.names()})
    for other in (*STAGES.names(), *ARTIFACTS, "all", "plan", "report"):
        names.pop(other, None)
    return names


def dataset_names() -> dict[str, str]:
    names = {}
    for path in (ROOT / "conf" / "dataset").glob("*.yaml"):
        names[path.stem] = names[path.stem.removesuffix("_bundled")] = "dataset"
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def named_literals(path: Path, names: dict[str, str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [f"{path.relative_to(ROOT)}:{node.lineno}: {names[node.value]} {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip and node.value in names]


def generic_files(entries: list[str] = GENERIC) -> list[Path]:
    out = []
    for entry in entries:
        path = ROOT / entry
        out += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return out


def test_the_generic_layers_name_no_registered_part():
    names = registered_names()
    assert {"sets", "sets-fbeta", "bayes", "bayes_fbeta", "beam", "bayes_risk",
            "latent_entropy", "semantic_entropy"} <= set(names)
    found = [hit for path in generic_files() for hit in named_literals(path, names)]
    assert found == []


def test_the_reporting_names_datasets_only_in_the_papers_vocabulary():
    names = dataset_names()
    assert {"maqa", "maqa_bundled", "triviaqa", "wmt19_fien", "cnn_dm", "maqa_star"} <= set(names)
    found = [hit for path in generic_files(["pipeline/reporting"])
             if path != ROOT / PAPER_VOCABULARY for hit in named_literals(path, names)]
    assert found == []
    assert named_literals(ROOT / PAPER_VOCABULARY, names)  # where they are


# The components below the tasks serve every task: they name no task, latent space or dataset
# (the estimators and decisions they define are theirs to name). pipeline/data is where the
# datasets are registered, so it is not among them.
COMPONENTS = ["pipeline/clients", "pipeline/evaluation", "pipeline/mapping", "pipeline/generation",
              "pipeline/uncertainty", "pipeline/aux_models.py"]


def test_the_components_name_no_task_space_or_dataset():
    names = {k: v for k, v in registered_names().items() if v in ("task", "latent space")}
    names.update(dataset_names())
    assert {"sets", "sets-fbeta", "graphs", "maqa", "cnn_dm"} <= set(names)
    found = [hit for path in generic_files(COMPONENTS) for hit in named_literals(path, names)]
    assert found == []


def test_the_check_finds_a_planted_name(tmp_path, monkeypatch):
    planted = ROOT / "pipeline" / "stages" / "_planted_for_test.py"
    planted.write_text('"""doc naming \'bayes\' is fine."""\nTARGET = "bayes_risk"\n'
                       'ok = f"{TARGET}_x"\n', encoding="utf-8")
    try:
        hits = named_literals(planted, registered_names())
    finally:
        planted.unlink()
    assert hits == ["pipeline/stages/_planted_for_test.py:2: UQ estimator 'bayes_risk'"]


@pytest.mark.parametrize("entry", [*GENERIC, PAPER_VOCABULARY, *COMPONENTS])
def test_every_generic_entry_exists(entry):
    assert (ROOT / entry).exists()


def test_the_generic_layers_import_no_task_folder():
    """A generic module reaches a task's code through the registries, never by importing a
    task folder (`pipeline.tasks.<name>`): the stages, the scorer, tracking and reporting."""
    folders = set(task_folders())
    found = []
    for path in (p for g in GENERIC for p in ([ROOT / g] if g.endswith(".py")
                                              else sorted((ROOT / g).rglob("*.py")))):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["pipeline", "tasks"] and len(parts) > 2 and parts[2] in folders:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert found == []
