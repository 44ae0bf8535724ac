"""The package's import structure (scripts/import_graph.py): layers point one way, no cycles.

Layers, lowest first: base (errors, registry, text, schema, store, the stage contract), latent
(with each task folder's space), the components in ordered sub-layers (clients, data, evaluation,
mapping, generation, uncertainty, aux_models), tasks, stages, app (driver, scorer, tracking,
reporting). A lower layer never imports a higher one, even inside a function.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import import_graph  # noqa: E402

EDGES = import_graph.imports()


def test_every_module_has_a_layer():
    for module in import_graph.modules():
        import_graph.layer(module)  # raises KeyError naming the module otherwise


def test_no_import_cycles():
    assert import_graph.cycles(EDGES) == []


def test_no_upward_imports():
    assert [f"{e.source}:{e.line} -> {e.target}" for e in import_graph.upward(EDGES)] == []


def test_the_components_are_ordered_sub_layers():
    assert import_graph.ORDER == [
        "base",
        "latent",
        "clients",
        "data",
        "evaluation",
        "mapping",
        "generation",
        "uncertainty",
        "aux_models",
        "tasks",
        "stages",
        "app",
        "api",
        "harness",
    ]
    # the endpoint client is shared from below: generation and the task readers use it
    assert import_graph.layer("pipeline.clients.llm_client") == "clients"
    assert import_graph.layer("pipeline.tasks.builders") == "tasks"
    # a component reaching up to the model factories is an upward import, even in a function
    planted = [
        import_graph.Import("pipeline.mapping.judges", "pipeline.aux_models.factories", 1, True),
        import_graph.Import("pipeline.mapping.labels", "pipeline.generation.base", 1, False),
        import_graph.Import(
            "pipeline.aux_models.factories", "pipeline.uncertainty.cross_encoder", 1, True
        ),
    ]
    assert import_graph.upward(planted) == planted[:2]


def test_the_stage_contract_needs_only_the_base_layer():
    # stage modules import the contract (pipeline.artifacts.stage); the Hydra job
    # (pipeline.driver.job) runs them
    assert {
        import_graph.layer(e.target) for e in EDGES if e.source == "pipeline.artifacts.stage"
    } == {"base"}
    assert {e.source for e in EDGES if e.target == "pipeline.driver.job"} <= {
        "pipeline.__main__",
        "pipeline.driver.callbacks",
    }


def test_the_checker_finds_a_planted_cycle_and_upward_import(tmp_path):
    """The checker itself, on a planted package: a cycle and an upward import are reported."""
    pkg = tmp_path / "pipeline"
    (pkg / "latent").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for package in ("runtime", "text"):
        (pkg / package).mkdir()
        (pkg / package / "__init__.py").write_text("")
    # base -> base: a cycle
    (pkg / "runtime" / "errors.py").write_text("from pipeline.text.normal_forms import x\n")
    (pkg / "text" / "normal_forms.py").write_text(
        "def f():\n    from pipeline.runtime.errors import y\n"
    )
    (pkg / "latent" / "__init__.py").write_text("")
    (pkg / "latent" / "sets.py").write_text("def g():\n    from pipeline.stages import z\n")
    (pkg / "stages").mkdir()
    (pkg / "stages" / "__init__.py").write_text("")
    # a task folder: its space is in the latent layer, its task.py in the tasks layer
    (pkg / "tasks" / "clock").mkdir(parents=True)
    for init in (pkg / "tasks" / "__init__.py", pkg / "tasks" / "clock" / "__init__.py"):
        init.write_text("")
    (pkg / "tasks" / "clock" / "space.py").write_text("from pipeline.tasks.clock import task\n")
    (pkg / "tasks" / "clock" / "task.py").write_text("from pipeline.latent import sets\n")
    edges = import_graph.imports(tmp_path)
    assert import_graph.cycles(edges) == [["pipeline.runtime.errors", "pipeline.text.normal_forms"]]
    assert [(e.source, e.target, e.in_function) for e in import_graph.upward(edges)] == [
        ("pipeline.latent.sets", "pipeline.stages", True),
        ("pipeline.tasks.clock.space", "pipeline.tasks.clock.task", False),
    ]


def test_only_the_resolving_layer_and_the_entry_points_take_the_config():
    """Hydra's config is read once, into the typed cell (pipeline.config.resolve): every other
    function takes the resolved objects. A function taking `cfg` (or a DictConfig) elsewhere
    fails here, named with its line."""
    takers = import_graph.config_takers()
    assert [
        f"{t.module}:{t.line} {t.function}({t.parameter})"
        for t in import_graph.outside_readers(takers)
    ] == []
    assert {t.module for t in takers} >= {"pipeline.config.resolve", "pipeline.driver.job"}


def test_the_config_check_finds_a_planted_config_taker(tmp_path):
    pkg = tmp_path / "pipeline"
    (pkg / "stages").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "stages" / "__init__.py").write_text("")
    (pkg / "stages" / "x.py").write_text(
        "def a(cfg):\n    pass\n\ndef b(cell, sampling):\n    pass\n\n"
        "def c(node: 'DictConfig'):\n    pass\n"
    )
    (pkg / "driver").mkdir()
    (pkg / "driver" / "__init__.py").write_text("")
    (pkg / "driver" / "job.py").write_text("def run(cfg):\n    pass\n")
    takers = import_graph.config_takers(tmp_path)
    assert sorted((t.module, t.function) for t in takers) == [
        ("pipeline.driver.job", "run"),
        ("pipeline.stages.x", "a"),
        ("pipeline.stages.x", "c"),
    ]
    assert [(t.module, t.function) for t in import_graph.outside_readers(takers)] == [
        ("pipeline.stages.x", "a"),
        ("pipeline.stages.x", "c"),
    ]


def test_every_long_or_wide_function_says_why_next_to_it():
    """A function over 60 lines or 8 parameters carries a `# size: ...` reason right above it
    (CONTRIBUTING.md); the rest are split, or take a parameter object."""
    assert [
        f"{f.module}:{f.line} {f.function}: {f.lines} lines, {f.parameters} parameters"
        for f in import_graph.large_functions()
        if not f.reason
    ] == []


def test_the_size_check_reads_the_reason_above_a_def_or_its_decorators(tmp_path):
    pkg = tmp_path / "pipeline"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (pkg / "m.py").write_text(
        f"def long_without():\n{body}\n\n"
        "# size: a flat list of steps,\n# read top to bottom\n"
        f"@decorator\ndef long_with():\n{body}\n\n"
        "# size: nothing, this is a comment of another block\n\n"
        "def wide(a, b, c, d, e, f, g, h, i):\n    pass\n\n"
        "class C:\n    def short(self, a, b, c, d, e, f, g, h):\n        pass\n"
    )
    found = {f.function: f for f in import_graph.large_functions(tmp_path)}
    assert sorted(found) == ["long_with", "long_without", "wide"]
    assert (found["long_without"].lines, found["long_without"].reason) == (61, "")
    assert found["long_with"].reason == "a flat list of steps, read top to bottom"
    assert (found["wide"].parameters, found["wide"].reason) == (9, "")
