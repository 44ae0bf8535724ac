"""A task is one folder (issue 39): pipeline/tasks/<name>/ holds its config, its space, its
parts and its reading; the space imports alone; `pipeline.latent` keeps every public name;
`task.options` reaches every part of the task, and each part gets the task's space."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pipeline.tasks import task_folders

BUILT_IN = ["classes", "graphs", "reals", "sets", "sets_fbeta", "simplex", "sphere"]


def test_every_built_in_task_is_a_folder_with_its_config_and_space():
    from pipeline.data.references import REFERENCES
    from pipeline.latent import space_class
    from pipeline.scorer.run import compose_config
    from pipeline.tasks.contract import MAPPERS, METRICS

    assert sorted(task_folders()) == BUILT_IN
    for name, folder in task_folders().items():
        assert (folder / "space.py").is_file(), name  # every task has its own space
        cfg = compose_config(name)
        assert cfg.task.name == name
        # the space is the folder's own; the parts are registered by a task folder's task.py
        assert space_class(cfg.task.space).__module__ == f"pipeline.tasks.{name}.space"
        for part in (
            MAPPERS[cfg.task.mapper].build,
            REFERENCES[cfg.task.reference].check,
            *(METRICS[m].fn or METRICS[m].scorer for m in cfg.task.metrics),
        ):
            assert part.__module__.startswith("pipeline.tasks."), (name, part)


def test_a_space_imports_alone_and_pipeline_latent_keeps_its_public_names():
    code = (
        "import sys; import pipeline.tasks.sets_fbeta.space as s; "
        "print(sorted(m.split('.')[0] if not m.startswith('pipeline') else m "
        "for m in sys.modules if m.startswith(('pipeline', 'pandas', 'torch', 'omegaconf'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert eval(loaded.stdout) == [  # numpy only: no mapping, data, pandas or config code
        "pipeline",
        "pipeline.api",
        "pipeline.components",
        "pipeline.components.registry",
        "pipeline.latent",
        "pipeline.latent.base",
        "pipeline.latent.codec",
        "pipeline.runtime",
        "pipeline.runtime.errors",
        "pipeline.tasks",
        "pipeline.tasks.sets",
        "pipeline.tasks.sets.space",
        "pipeline.tasks.sets_fbeta",
        "pipeline.tasks.sets_fbeta.space",
    ]

    from pipeline import latent
    from pipeline.tasks.sets.space import SetSpace
    from pipeline.tasks.sphere.space import sphere_bayes_batch

    assert latent.SetSpace is SetSpace and latent.sphere_bayes_batch is sphere_bayes_batch
    for name in latent.__all__:
        assert getattr(latent, name) is not None, name
    assert latent.available_spaces() == [
        "classes",
        "graphs",
        "reals",
        "sets",
        "sets-fbeta",
        "simplex",
        "sphere",
    ]
    with pytest.raises(AttributeError, match="no attribute 'TreeSpace'"):
        latent.TreeSpace  # noqa: B018


# A plugin task on a clock of `period` hours: the space, the mapper and the metric each read
# `period` from task.options; the metric computes d_T through the space it is handed.
PLUGIN = """
from dataclasses import dataclass

import numpy as np

from pipeline.latent import BayesResult, LatentSpace, register
from pipeline.tasks import MAPPERS, METRICS, Mapper, Metric


@register("ticks")
class TickSpace(LatentSpace):
    def __init__(self, period=24):
        self.period = period

    def canonical(self, latent):
        return int(latent) % self.period

    def distance(self, a, b):
        diff = abs(a - b) % self.period
        return min(diff, self.period - diff)

    def _pairwise_distances(self, items):
        return np.array([[self.distance(a, b) for b in items] for a in items], dtype=float)

    def _risk(self, action, items, w):
        return float(sum(wi * self.distance(action, b) for wi, b in zip(w, items)) / sum(w))

    def _bayes(self, items, w):  # some sample minimises the risk on a circle
        risks = [self._risk(a, items, w) for a in items]
        best = min(range(len(items)), key=risks.__getitem__)
        return BayesResult(items[best], risks[best])

    def encode(self, latent):
        return int(latent)

    def decode(self, payload):
        return int(payload)


@dataclass
class Period:
    period: int = 24


def build(settings, context):
    seen.append((settings.period, context.space.period))
    return lambda question, texts, attached=(): [int(t) % settings.period for t in [*texts, *attached]]


def ticks_off(action, ref, settings):
    return ref.space.distance(action, int(ref.answers[0][0]) % settings.period)


seen = []
MAPPERS.add("ticks", Mapper(build, Period), replace=True)
METRICS.add("ticks_off", Metric("Ticks off", higher_is_better=False, fn=ticks_off, Config=Period),
            replace=True)
"""


@pytest.fixture
def ticks(tmp_path, monkeypatch):
    (tmp_path / "ticksplugin.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "conf" / "task").mkdir(parents=True)
    (tmp_path / "conf" / "task" / "ticks.yaml").write_text(
        "defaults:\n  - /schema/task@_here_\nname: ticks\nspace: ticks\nmapper: ticks\n"
        "reference: one_answer\nprompt: single_answer\nmetrics: [ticks_off]\noptions: {period: 12}\n"
    )
    yield tmp_path
    sys.modules.pop("ticksplugin", None)


def _score(tmp_path, *overrides):
    from pipeline.scorer.run import score

    rows = [
        {"id": "q0", "question": "Which hour?", "responses": ["13", "1", "11"], "reference": "23"}
    ]
    return score(
        rows,
        task="ticks",
        plugins=["ticksplugin"],
        config_dirs=[tmp_path / "conf"],
        work_dir=tmp_path / "work",
        overrides=list(overrides),
    )


def circular(a, b, period):  # the clock distance, written again for the check
    return min((a - b) % period, (b - a) % period)


def test_task_options_reach_the_space_the_mapper_and_the_metric(ticks):
    out = _score(ticks)
    # period 12: 13 -> 1, so the latents are [1, 1, 11]; the Bayes action 1 (risk 2/3 on the
    # 12-hour clock, 10/3 had the space kept its default of 24)
    assert out["bayes_risk"].tolist() == [
        pytest.approx(sum(circular(1, b, 12) for b in (1, 1, 11)) / 3)
    ]
    assert out["quality_bayes_ticks_off"].tolist() == [
        circular(1, 23 % 12, 12)
    ]  # d_T via ref.space
    assert sys.modules["ticksplugin"].seen[-1] == (12, 12)  # the mapper's setting and its space
    # an option is in the map stage's key: changed in the same work folder, new latents
    out = _score(ticks, "task.options.period=24")
    risks = {a: sum(circular(a, b, 24) for b in (13, 1, 11)) / 3 for a in (13, 1, 11)}
    assert out["bayes_risk"].tolist() == [pytest.approx(min(risks.values()))]
    assert sys.modules["ticksplugin"].seen[-1] == (24, 24)


def test_a_task_option_no_part_reads_or_set_twice_is_refused(ticks):
    from pipeline.scorer.run import ScoreInputError

    with pytest.raises(
        ScoreInputError, match=r"task.options.perod: no part of task ticks reads it"
    ):
        _score(ticks, "+task.options.perod=3")
    with pytest.raises(
        ScoreInputError,
        match=r"mappers.ticks.period=5 and task.options.period=12: "
        r"set it once, as task.options.period",
    ):
        _score(ticks, "++mappers.ticks.period=5")


def test_a_plugin_task_is_one_folder_like_a_built_in_one(tmp_path, monkeypatch):
    """my_tasks/ticks/{__init__.py, space.py, task.py, task.yaml}: the folder of task folders is
    a config folder (`--config-dir my_tasks`; taskfolders:// on Hydra's search path) and the
    package the plugin (`--plugin my_tasks.ticks`)."""
    from hydra import compose, initialize_config_dir

    from pipeline.config import register_configs
    from pipeline.runtime.resources import conf_dir
    from pipeline.scorer.run import score
    from pipeline.tasks import config_source

    folder = tmp_path / "my_tasks" / "ticks"
    folder.mkdir(parents=True)
    (tmp_path / "my_tasks" / "__init__.py").write_text("")
    source = textwrap.dedent(PLUGIN)
    split = source.index("@dataclass\nclass Period")
    (folder / "space.py").write_text(source[:split])  # the space, then the parts using it
    (folder / "task.py").write_text(
        "from dataclasses import dataclass\n\n"
        "from pipeline.tasks import MAPPERS, METRICS, Mapper, Metric\n\n" + source[split:]
    )
    (folder / "__init__.py").write_text("from . import space, task  # noqa: F401\n")
    (folder / "task.yaml").write_text(
        "defaults:\n  - /schema/task@_here_\nname: ticks\nspace: ticks\nmapper: ticks\n"
        "reference: one_answer\nprompt: single_answer\nmetrics: [ticks_off]\noptions: {period: 12}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert config_source(tmp_path / "my_tasks") == f"taskfolders://{tmp_path / 'my_tasks'}"
    try:
        rows = [
            {
                "id": "q0",
                "question": "Which hour?",
                "responses": ["13", "1", "11"],
                "reference": "23",
            }
        ]
        out = score(
            rows,
            task="ticks",
            plugins=["my_tasks.ticks"],
            config_dirs=[tmp_path / "my_tasks"],
            work_dir=tmp_path / "work",
        )
        assert out["quality_bayes_ticks_off"].tolist() == [circular(1, 23 % 12, 12)]
        # the command line's form: the folder on Hydra's search path
        register_configs()
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[
                    f"hydra.searchpath=[{config_source(tmp_path / 'my_tasks')}]",
                    "task=ticks",
                ],
            )
        assert cfg.task.options.period == 12 and cfg.task.space == "ticks"
    finally:
        for name in [m for m in sys.modules if m.startswith("my_tasks")]:
            sys.modules.pop(name)


def _ticks_folder(folder, tmp_path, monkeypatch) -> list[dict]:
    """The ticks task's task.yaml in `folder`, `tmp_path` importable: the rows to score."""
    (folder / "task.yaml").write_text(
        "defaults:\n  - /schema/task@_here_\nname: ticks\nspace: ticks\nmapper: ticks\n"
        "reference: one_answer\nprompt: single_answer\nmetrics: [ticks_off]\noptions: {period: 12}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return [
        {"id": "q0", "question": "Which hour?", "responses": ["13", "1", "11"], "reference": "23"}
    ]


def test_editing_a_plugin_reruns_exactly_the_stages_that_use_its_code(tmp_path, monkeypatch):
    """my_tasks/ticks/ with the space (space.py), the mapper (task.py) and the metric
    (metric.py) in three files: each edit reruns the stages using what it defines (plus those
    fed by their outputs), the others stay current; the new code's numbers come out."""
    from pipeline.artifacts.store import ArtifactStore
    from pipeline.scorer.run import score

    folder = tmp_path / "my_tasks" / "ticks"
    folder.mkdir(parents=True)
    (tmp_path / "my_tasks" / "__init__.py").write_text("")
    source = textwrap.dedent(PLUGIN)
    split, metric = source.index("@dataclass\nclass Period"), source.index("def ticks_off")
    head = "from dataclasses import dataclass\n\nfrom pipeline.tasks import MAPPERS, METRICS, Mapper, Metric\n\n"
    (folder / "space.py").write_text(source[:split])
    (folder / "task.py").write_text(
        head + source[split:metric] + "\nseen = []\n"
        "MAPPERS.add('ticks', Mapper(build, Period), replace=True)\n"
    )
    metric_src = (
        head
        + "from .task import Period\n\n\n"
        + source[metric : source.index("\n\nseen")]
        + "\n\n\nMETRICS.add('ticks_off', Metric('Ticks off', higher_is_better=False, "
        "fn=ticks_off, Config=Period), replace=True)\n"
    )
    (folder / "metric.py").write_text(metric_src)
    (folder / "__init__.py").write_text("from . import metric, space, task  # noqa: F401\n")
    rows = _ticks_folder(folder, tmp_path, monkeypatch)
    names = ("dataset", "latents", "decisions", "uncertainty", "quality")

    def run():
        for name in [m for m in sys.modules if m.startswith("my_tasks")]:
            sys.modules.pop(name)  # as a new process would: the edited files are imported
        out = score(
            rows,
            task="ticks",
            plugins=["my_tasks.ticks"],
            config_dirs=[tmp_path / "my_tasks"],
            work_dir=tmp_path / "work",
        )
        store = ArtifactStore(out.attrs["store"])
        return out, {name: store.key(name) for name in names}

    def changed(before, after):
        return {name for name in names if before[name] != after[name]}

    try:
        out, keys = run()
        assert out["quality_bayes_ticks_off"].tolist() == [circular(1, 23 % 12, 12)]
        assert changed(keys, run()[1]) == set()  # nothing edited: all current
        # the metric's code: evaluate only (its distance now doubled)
        (folder / "metric.py").write_text(
            metric_src.replace("return ref.space", "return 2 * ref.space")
        )
        out, after = run()
        assert changed(keys, after) == {"quality"}
        assert out["quality_bayes_ticks_off"].tolist() == [2 * circular(1, 23 % 12, 12)]
        keys = after
        # the mapper's reader (what the user fixed): map and all it feeds
        (folder / "task.py").write_text(
            (folder / "task.py")
            .read_text()
            .replace("int(t) % settings.period", "(int(t) + 1) % settings.period")
        )
        out, after = run()
        assert changed(keys, after) == {"latents", "decisions", "uncertainty", "quality"}
        # latents [2, 2, 0]: the Bayes action 2, risk 2/3
        assert out["bayes_risk"].tolist() == [pytest.approx(2 / 3)]
    finally:
        for name in [m for m in sys.modules if m.startswith("my_tasks")]:
            sys.modules.pop(name)


def test_the_console_scripts_import_plugins_from_the_working_directory(tmp_path):
    """`taskaware-score --plugin ticksplugin` and `taskaware plugins=[ticksplugin]` run from the
    folder holding it, as `python -m` does (console scripts do not put it on sys.path)."""
    import os
    from pathlib import Path

    (tmp_path / "ticksplugin.py").write_text(textwrap.dedent(PLUGIN))
    (tmp_path / "conf" / "task").mkdir(parents=True)
    (tmp_path / "conf" / "task" / "ticks.yaml").write_text(
        "defaults:\n  - /schema/task@_here_\nname: ticks\nspace: ticks\nmapper: ticks\n"
        "reference: one_answer\nprompt: single_answer\nmetrics: [ticks_off]\noptions: {period: 12}\n"
    )
    (tmp_path / "in.jsonl").write_text('{"responses": ["13", "1", "11"], "reference": "23"}\n')
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [
            str(bin_dir / "taskaware-score"),
            "in.jsonl",
            "--task",
            "ticks",
            "--config-dir",
            "conf",
            "--plugin",
            "ticksplugin",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "scored 1 prompts" in done.stdout
    done = subprocess.run(
        [
            str(bin_dir / "taskaware"),
            "stage=plan",
            "plugins=[ticksplugin]",
            "task=ticks",
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            f"output_root={tmp_path / 'out'}",
            "wandb.enabled=false",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_one_file_imported_under_two_names_registers_once_a_second_file_is_refused(tmp_path):
    """pytest imports a plugin folder without a parent __init__.py under its rootdir-relative
    name as well as the plugin's: the same file's second registration replaces its own (it
    raised "already registered (pass replace=True)"); another file taking the name is refused."""
    import importlib.util

    from pipeline.tasks import METRICS

    (tmp_path / "twice.py").write_text(
        "from pipeline.tasks import METRICS, Metric\n\n"
        "def off(action, reference, settings):\n    return 0.0\n\n"
        "METRICS.add('twice_off', Metric('Twice', higher_is_better=False, fn=off))\n"
    )
    (tmp_path / "other.py").write_text((tmp_path / "twice.py").read_text())
    try:
        for name in ("twice", "pkg.twice"):
            spec = importlib.util.spec_from_file_location(name, tmp_path / "twice.py")
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        assert METRICS["twice_off"].fn.__module__ == "pkg.twice"
        assert METRICS.origin("twice_off") == "pkg.twice"
        spec = importlib.util.spec_from_file_location("other", tmp_path / "other.py")
        with pytest.raises(ValueError, match="'twice_off' is already registered"):
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        METRICS._entries.pop("twice_off", None)


def test_a_plugins_helpers_beside_it_and_loaded_by_name_are_in_its_key(tmp_path, monkeypatch):
    """The metric reads a factor from a sibling package of the plugin (`mylib/`, beside
    `my_tasks/` in the working folder) and an offset from a module it loads with
    importlib.import_module: editing either gives the new numbers on a rerun (they were
    "up to date, skipped")."""
    from pipeline.scorer.run import score

    folder = tmp_path / "my_tasks" / "ticks"
    folder.mkdir(parents=True)
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "mylib" / "scale.py").write_text("FACTOR = 1\n")
    (folder / "offset.py").write_text("OFFSET = 0\n")
    source = textwrap.dedent(PLUGIN)
    (folder / "space.py").write_text(source[: source.index("@dataclass\nclass Period")])
    task = source[source.index("@dataclass\nclass Period") :].replace(
        "    return ref.space.distance(",
        "    offset = importlib.import_module("
        "'my_tasks.ticks.offset').OFFSET\n    return offset + FACTOR * ref.space.distance(",
    )
    (folder / "task.py").write_text(
        "import importlib\nfrom dataclasses import dataclass\n\nfrom mylib.scale import FACTOR\n"
        "from pipeline.tasks import MAPPERS, METRICS, Mapper, Metric\n\n" + task
    )
    (folder / "__init__.py").write_text("from . import space, task  # noqa: F401\n")
    rows = _ticks_folder(folder, tmp_path, monkeypatch)

    def off():
        for name in [m for m in sys.modules if m.startswith(("my_tasks", "mylib"))]:
            sys.modules.pop(name)  # as a new process would
        out = score(
            rows,
            task="ticks",
            plugins=["my_tasks.ticks"],
            config_dirs=[tmp_path / "my_tasks"],
            work_dir=tmp_path / "work",
        )
        return out["quality_bayes_ticks_off"].tolist()

    try:
        base = circular(1, 23 % 12, 12)
        assert off() == [base]
        (tmp_path / "mylib" / "scale.py").write_text("FACTOR = 3\n")
        assert off() == [3 * base]
        (folder / "offset.py").write_text("OFFSET = 100\n")
        assert off() == [100 + 3 * base]
    finally:
        for name in [m for m in sys.modules if m.startswith(("my_tasks", "mylib"))]:
            sys.modules.pop(name)


@pytest.mark.parametrize(
    "source, said",
    [
        (
            "x = (\n",
            r"plugins: importing 'brokenplug' failed with SyntaxError at .*brokenplug.py:1",
        ),
        (
            "raise RuntimeError('boom')\n",
            r"plugins: importing 'brokenplug' failed with RuntimeError at .*brokenplug.py:1: boom",
        ),
        (
            "import not_installed_pkg_xyz\n",
            r"plugins: 'brokenplug' imports 'not_installed_pkg_xyz', which is not installed",
        ),
    ],
)
def test_a_plugin_that_fails_to_import_is_one_error_naming_it(tmp_path, monkeypatch, source, said):
    """A plugin's own SyntaxError or exception at import was a traceback and exit 1; a missing
    dependency of the plugin was reported as the plugin itself not being importable."""
    from pipeline.scorer.readers import ScoreInputError
    from pipeline.scorer.run import score

    (tmp_path / "brokenplug.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ScoreInputError, match=said):
            score([["Paris"]], task="classes", plugins=["brokenplug"])
    finally:
        sys.modules.pop("brokenplug", None)
