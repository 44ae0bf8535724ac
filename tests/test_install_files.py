"""The install files agree with each other (issue 37): pyproject.toml's extras, constraints.txt,
environment.yml, the Makefile, the README's Install section, and pipeline.runtime.extras' table of which
extra brings each module (checked against the installed distributions' own file lists)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from pipeline.runtime.extras import EXTRA_OF, EXTRAS, MissingExtraError, explain, require

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS_DECLARED = PROJECT["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def _constraints() -> list[str]:
    lines = (REPO / "constraints.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_the_core_has_no_torch_and_the_extras_are_by_use():
    core = _names(PROJECT["dependencies"])
    assert {"aiohttp", "matplotlib", "numpy", "pandas", "pyarrow", "hydra-core"} <= core
    assert not core & {"torch", "transformers", "lm-polygraph", "unbabel-comet", "submitit"}
    assert set(EXTRAS_DECLARED) == {"local", "paper", "serve", "lm-eval", "all", "dev"}
    assert {"torch", "transformers"} <= _names(EXTRAS_DECLARED["local"])
    assert {
        "lm-polygraph",
        "unbabel-comet",
        "sentence-transformers",
        "wandb",
        "submitit",
        "hydra-submitit-launcher",
    } <= _names(EXTRAS_DECLARED["paper"])
    assert EXTRAS_DECLARED["all"] == ["task-aware-pipeline[local,paper,serve,lm-eval]"]
    assert _names(EXTRAS_DECLARED["lm-eval"]) == {"lm-eval"}
    # caps of one dependency live in its extra, not in the core
    for req in map(Requirement, PROJECT["dependencies"]):
        assert not any(s.operator in ("<", "<=", "==") for s in req.specifier), req
    assert SpecifierSet(PROJECT["requires-python"]) == SpecifierSet(">=3.11,<3.14")


def test_pipeline_extras_names_each_module_in_the_extra_of_its_distribution():
    """Each module of the table is brought by the distribution it names (from the installed
    distributions' file lists), and that distribution is listed in that extra."""
    provided = importlib.metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        declared = _names(PROJECT["dependencies"] if extra == "core" else EXTRAS_DECLARED[extra])
        for module, dist in modules.items():
            top = module.split(".")[0]
            if top != "hydra_plugins":  # a namespace shared by several distributions
                dists = {re.sub(r"[-_.]+", "-", d).lower() for d in provided[top]}  # PEP 503
                assert dist in dists, (module, provided.get(top))
            assert dist in declared, (extra, dist)
            if extra != "core":
                assert EXTRA_OF[module] == extra


def test_constraints_and_environment_yml_agree_with_the_extras():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    (pip_block,) = [d for d in env["dependencies"] if isinstance(d, dict)]
    pip_lines = pip_block["pip"]
    assert pip_lines[-1] == "-e .[all,dev]"
    assert [r.split("#")[0].strip() for r in pip_lines[:-1]] == _constraints()
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert python.split("=")[1] + ".0" in SpecifierSet(PROJECT["requires-python"])
    # every pinned distribution is one the project's extras ask for (or torch's build)
    wanted = _names([r for e in ("local", "paper") for r in EXTRAS_DECLARED[e]])
    assert _names(_constraints()) <= wanted | {"torch"}, _names(_constraints()) - wanted
    makefile = (REPO / "Makefile").read_text()
    assert '-c constraints.txt -e ".[all,dev]"' in makefile


def test_the_readme_installs_before_it_runs_and_names_real_extras():
    readme = (REPO / "README.md").read_text()
    assert readme.index("## Install") < readme.index("## Running it")
    named = set(re.findall(r"pip install '\.\[([\w,]+)\]'", readme))
    named = {extra for group in named for extra in group.split(",")}
    assert named == {"local", "paper", "serve", "all"} and named <= set(EXTRAS_DECLARED)
    first_code = readme.split("```python", 1)[1].split("```", 1)[0]
    assert "pipeline.score(" in first_code and "base_url" not in first_code


def test_a_missing_module_is_named_with_its_extra():
    require("numpy", "torch", needed_for="this test")  # installed here: nothing raised
    try:
        require("torch", "no_such_module_for_this_test", needed_for="a thing")
    except MissingExtraError as exc:
        assert str(exc) == (
            "a thing needs no_such_module_for_this_test, not installed: pip "
            "install 'task-aware-pipeline[all]' (from a checkout: pip install "
            "-e '.[all]')"
        )
    else:
        raise AssertionError("require did not raise")
    named = explain(ModuleNotFoundError("No module named 'lm_polygraph'", name="lm_polygraph"))
    assert isinstance(named, MissingExtraError) and "'task-aware-pipeline[paper]'" in str(named)
    assert explain(ModuleNotFoundError("x", name="not_an_optional_library")) is None
