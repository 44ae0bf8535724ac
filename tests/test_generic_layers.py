"""The generic layers name no task, latent space, decision method or UQ estimator: pipeline/config,
the stages, the scorer, tracking and reporting loop over what the registries and the task
declare (pipeline.components.methods: OURS/BASELINE/F_BETA are the roles they compare; the estimators'
registry: labels, table order, the risk of a decision). A string literal in their code (not a
docstring) equal to a registered name fails here, naming file and line. Names that are also a
stage or an artifact ("map", "ptrue") mean the stage or artifact there, and are not counted.
Nor does the reporting name a dataset (conf/dataset/*.yaml, with or without "_bundled") outside
the paper's vocabulary, pipeline/reporting/paper.py (which dataset is which column, the labels,
the figure sets). The components (clients, evaluation, mapping, generation, uncertainty, the
auxiliary models) name no task, latent space or dataset.

Every generic module (each module under pipeline/ outside a task folder pipeline/tasks/<task>/,
the tasks package's own contract, builders and text metrics included) imports no task folder and
names no task or latent space: it reaches a task's code through the registries."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.artifacts.schema import ARTIFACTS
from pipeline.artifacts.stage import STAGES
from pipeline.components.methods import METHODS
from pipeline.latent import available_spaces
from pipeline.tasks import task_folders
from pipeline.uncertainty.estimators import ESTIMATORS

ROOT = Path(__file__).resolve().parents[1]
GENERIC = [
    "pipeline/config",
    "pipeline/stages",
    "pipeline/scorer/run.py",
    "pipeline/scorer/readers.py",
    "pipeline/tracking",
    "pipeline/reporting",
]
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
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {names[node.value]} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and node.value in names
    ]


def generic_files(entries: list[str] = GENERIC) -> list[Path]:
    out = []
    for entry in entries:
        path = ROOT / entry
        out += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return out


def test_the_generic_layers_name_no_registered_part():
    names = registered_names()
    assert {
        "sets",
        "sets-fbeta",
        "bayes",
        "bayes_fbeta",
        "beam",
        "bayes_risk",
        "latent_entropy",
        "semantic_entropy",
    } <= set(names)
    found = [hit for path in generic_files() for hit in named_literals(path, names)]
    assert found == []


def test_the_reporting_names_datasets_only_in_the_papers_vocabulary():
    names = dataset_names()
    assert {"maqa", "maqa_bundled", "triviaqa", "wmt19_fien", "cnn_dm", "maqa_star"} <= set(names)
    found = [
        hit
        for path in generic_files(["pipeline/reporting"])
        if path != ROOT / PAPER_VOCABULARY
        for hit in named_literals(path, names)
    ]
    assert found == []
    assert named_literals(ROOT / PAPER_VOCABULARY, names)  # where they are


# The components below the tasks serve every task: they name no task, latent space or dataset
# (the estimators and decisions they define are theirs to name). pipeline/data is where the
# datasets are registered, so it is not among them.
COMPONENTS = [
    "pipeline/clients",
    "pipeline/evaluation",
    "pipeline/mapping",
    "pipeline/generation",
    "pipeline/uncertainty",
    "pipeline/aux_models/factories.py",
]


def test_the_components_name_no_task_space_or_dataset():
    names = {k: v for k, v in registered_names().items() if v in ("task", "latent space")}
    names.update(dataset_names())
    assert {"sets", "sets-fbeta", "graphs", "maqa", "cnn_dm"} <= set(names)
    found = [hit for path in generic_files(COMPONENTS) for hit in named_literals(path, names)]
    assert found == []


def test_the_check_finds_a_planted_name(tmp_path, monkeypatch):
    planted = ROOT / "pipeline" / "stages" / "_planted_for_test.py"
    planted.write_text(
        '"""doc naming \'bayes\' is fine."""\nTARGET = "bayes_risk"\nok = f"{TARGET}_x"\n',
        encoding="utf-8",
    )
    try:
        hits = named_literals(planted, registered_names())
    finally:
        planted.unlink()
    assert hits == ["pipeline/stages/_planted_for_test.py:2: UQ estimator 'bayes_risk'"]


@pytest.mark.parametrize("entry", [*GENERIC, PAPER_VOCABULARY, *COMPONENTS])
def test_every_generic_entry_exists(entry):
    assert (ROOT / entry).exists()


def generic_modules() -> list[Path]:
    """Every module under pipeline/ outside the task folders (pipeline/tasks/<task>/, a folder
    holding a task.yaml): the generic layers, whatever their layer."""
    folders = set(task_folders())
    return [
        path
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if not (
            path.relative_to(ROOT).parts[:2] == ("pipeline", "tasks")
            and len(path.relative_to(ROOT).parts) > 3
            and path.relative_to(ROOT).parts[2] in folders
        )
    ]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def task_folder_imports(path: Path, folders: set[str]) -> list[str]:
    """Where the module at `path` imports a task folder (`pipeline.tasks.<task>` or below):
    `import`, `from ... import` (absolute or relative, `from pipeline.tasks import sets`
    too), also under TYPE_CHECKING or inside a function, and `importlib.import_module` /
    `__import__` with a literal name."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                getattr(node.func, "attr", None) == "import_module"
                or getattr(node.func, "id", None) == "__import__"
            )
        ):
            names = [node.args[0].value]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["pipeline", "tasks"] and len(parts) > 2 and parts[2] in folders:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
                break
    return found


def test_every_generic_module_is_checked():
    modules = {p.relative_to(ROOT).as_posix() for p in generic_modules()}
    # the tasks package's generic modules are checked, a task folder's own are not
    assert {
        "pipeline/tasks/__init__.py",
        "pipeline/tasks/contract.py",
        "pipeline/tasks/builders.py",
        "pipeline/tasks/shared_metrics.py",
        "pipeline/driver/plan.py",
        "pipeline/driver/assets.py",
        "pipeline/mapping/answer_rules.py",
        "pipeline/latent/__init__.py",
        "pipeline/stages/map.py",
    } <= modules
    assert not any(
        m.startswith(("pipeline/tasks/sets/", "pipeline/tasks/graphs/")) for m in modules
    )
    every = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pipeline").rglob("*.py")}
    folders = {f"pipeline/tasks/{t}/" for t in task_folders()}
    assert every - modules == {m for m in every if m.startswith(tuple(folders))}


def test_the_generic_layers_import_no_task_folder():
    """A generic module reaches a task's code through the registries (MAPPERS, METRICS,
    REFERENCES, the spaces, EXTRACTIONS, ESTIMATORS), never by importing a task folder
    (`pipeline.tasks.<name>`). pipeline.latent re-exports each space by its public name
    (DESIGN s3) through the spaces' registry of folders, not an import statement."""
    folders = set(task_folders())
    found = [hit for path in generic_modules() for hit in task_folder_imports(path, folders)]
    assert found == []


# Where a generic module names a task or latent space as data, on purpose
NAMES_TASKS = {
    # which task folder defines each public name pipeline.latent re-exports (DESIGN s3)
    "pipeline/latent/__init__.py",
    # lm-evaluation-harness filter's default `task` argument, as its docs' example writes it
    "pipeline/harness/filter.py",
}


def test_every_generic_module_names_no_task_or_space():
    names = {k: v for k, v in registered_names().items() if v in ("task", "latent space")}
    assert {"sets", "sets-fbeta", "sets_fbeta", "graphs", "classes", "simplex"} <= set(names)
    found = [
        hit
        for path in generic_modules()
        if path.relative_to(ROOT).as_posix() not in NAMES_TASKS
        for hit in named_literals(path, names)
    ]
    assert found == []
    for allowed in NAMES_TASKS:  # each exception is still needed
        assert named_literals(ROOT / allowed, names), allowed


def test_the_import_check_finds_every_form(tmp_path, monkeypatch):
    planted = tmp_path / "pipeline" / "stages" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(
        "import pipeline.tasks.sets.reading\n"
        "from pipeline.tasks import graphs\n"
        "from ..tasks.simplex import metrics\n"
        "from pipeline.tasks import contract, MAPPERS\n"
        "def f():\n"
        "    import importlib\n"
        "    importlib.import_module('pipeline.tasks.classes.task')\n",
        encoding="utf-8",
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    hits = task_folder_imports(planted, {"sets", "graphs", "simplex", "classes"})
    assert [h.split(": ")[1] for h in hits] == [
        "pipeline.tasks.sets.reading",
        "pipeline.tasks.graphs",
        "pipeline.tasks.simplex",
        "pipeline.tasks.classes.task",
    ]
