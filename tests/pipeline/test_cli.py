"""The command line helps (issue 24): an unknown key is answered with the closest valid ones (never
with "+key"), an offline machine never waits on hub retries, a report over no cells says where it
looked and what to run, and a report goes under output_root unless results_dir is given."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.driver.overrides import unknown_key_problem, value_type_problem
from pipeline.runtime.offline import OFFLINE_VARS, go_offline_if_unreachable, hub_reachable

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"} if env is None else env
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- unknown keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, suggestion",
    [
        ("datset=maqa_bundled", "unknown key 'datset'; did you mean dataset=?"),
        ("wandb.enable=false", "unknown key 'wandb.enable'; did you mean wandb.enabled=?"),
        ("generation.num_samples=5", "did you mean generation.n_samples=?"),
        # Hydra's own advice, followed: accepted before with no effect (W&B stayed on)
        ("+datset=maqa_bundled", "unknown key 'datset'; did you mean dataset=?"),
        ("+wandb.enable=false", "unknown key 'wandb.enable'; did you mean wandb.enabled=?"),
    ],
)
def test_an_unknown_key_is_one_line_with_the_closest_keys_and_exit_2(
    tmp_path, override, suggestion
):
    done = cli("stage=plan", f"output_root={tmp_path}", override)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[pipeline] invalid configuration: unknown key")
    assert suggestion in lines[0] and "+" not in lines[0] and not done.stdout


@pytest.mark.parametrize(
    "override, closest",
    [
        ("num_samples=5", "generation.n_samples="),  # under the wrong parent
        ("~wandb.enable", "wandb.enabled="),
        ("++task.extractor.kindd=llm", "task.extractor.kind="),
        ("generation.beam=3", "generation.beam_width="),
        # a registered part's settings are known (Hydra said "+mappers.sphere.dimm=3")
        ("mappers.sphere.dimm=3", "mappers.sphere has embedder"),
        ("metrics.f1.meen=geometric", "metrics.f1.mean="),
        ("uq.groups.lm_polygraph.simlarity=x", "uq.groups.lm_polygraph.similarity="),
        ("wandb.zzz=1", "wandb has dir, enabled, entity"),
        ("-m", None),
        ("dataset=a,b", None),
        ("+rehearsal=local", None),
        ("~report_models", None),
        ("hydra.job.chdir=true", None),
        ("hydra/launcher=slurm", None),
        ("model=qwen3-4b", None),
        ("+mappers.sphere.embedder=x", None),
        ("metrics.f1.mean=geometric", None),
        ("mappers.my_plugin_mapper.x=1", None),  # maybe a plugin's part: validate() checks it
        ("+uq.groups.lm_polygraph.kwargs.sar.t=0.5", None),  # a free-form mapping
        ("dataset.overrides.split=test", None),
        ("--cfg", None),
        ("job", None),
    ],
)
def test_which_keys_are_known(override, closest):
    problem = unknown_key_problem([override])
    assert (problem is None) if closest is None else (closest in problem)


@pytest.mark.parametrize(
    "override, problem",
    [
        ("generation.n_samples=2.0", "generation.n_samples=2.0: an integer is expected; write 2"),
        (
            "dataset.limit=1e9",
            "dataset.limit=1000000000.0: an integer is expected; write 1000000000",
        ),
        ("dataset.max_new_tokens=nan", "dataset.max_new_tokens=nan: an integer is expected"),
        ("model.temperature=inf", "model.temperature=inf: a finite number is expected"),
        ("model.top_p=nan", "model.top_p=nan: a finite number is expected"),
        ("generation.n_samples=2,3.5", "generation.n_samples=3.5: an integer is expected"),
        ("wandb.enabled=maybe", "wandb.enabled='maybe': true or false is expected"),
        ("generation.n_samples=3", None),
        ("generation.n_samples='4'", None),
        ("model.temperature=0.7", None),
        ("model.top_p=1", None),
        ("dataset.limit=null", None),
        ("wandb.enabled=yes", None),
        ("dataset=maqa_bundled", None),
        ("~dataset.limit", None),
        ("~report_models", None),
        ("mappers.sphere.dim=3", None),  # not a typed field of the schema: validate() checks it
        # round 3b (the independent attack run): null where a setting cannot be null, a deletion,
        # a scalar for a group of settings
        (
            "generation.n_samples=null",
            "generation.n_samples=null: this setting cannot be null; give an integer",
        ),
        (
            "wandb.enabled=null",
            "wandb.enabled=null: this setting cannot be null; give true or false",
        ),
        (
            "~generation.n_samples",
            "~generation.n_samples removes a setting the pipeline reads; set "
            "it instead (generation.n_samples=...)",
        ),
        (
            "generation=5",
            "generation is a group of settings, not a value: set one of them, e.g. "
            "generation.n_samples=...",
        ),
        ("dataset.limit=null", None),
        ("model.temperature=null", None),
        ("dataset=maqa_bundled", None),
        # the second attack run: lists and groups
        (
            "uq.estimators=null",
            "uq.estimators=null: this setting cannot be null; give a list, e.g. "
            "uq.estimators=[a,b]",
        ),
        ("task.metrics=5", "task.metrics=5: a list is expected, e.g. task.metrics=[5]"),
        (
            "~task.metrics",
            "~task.metrics removes a setting the pipeline reads; set it instead (task.metrics=...)",
        ),
        ("backend=null", "backend=null: choose a backend (e.g. the one of conf/backend/)"),
        ("~dataset", "~dataset removes the dataset choice the pipeline needs; choose one instead"),
        ("generation.strategies=[greedy]", None),
        ("task=ticks", None),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line_before_hydra(override, problem):
    assert value_type_problem([override]) == problem


@pytest.mark.parametrize(
    "override",
    ["dataset.limit=a=b", "generation.n_samples=[1,", "backend.base_url=http://h/v1?code=X"],
)
def test_an_override_hydra_cannot_parse_is_one_line_saying_to_quote_it(override):
    from pipeline.driver.overrides import syntax_problem

    problem = syntax_problem(["stage=plan", override])
    assert problem.startswith(f"{override!r} cannot be read as an override (")
    assert problem.endswith(
        f"quote a value holding = [ ] ( ) or spaces: {override.split('=')[0]}='...'"
    )
    assert syntax_problem(["stage=plan", "backend.base_url='http://h/v1?code=X'"]) is None


def test_a_type_error_on_the_command_line_is_exit_2_and_one_line(tmp_path):
    done = cli("stage=plan", f"output_root={tmp_path}", "generation.n_samples=2.0")
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip().splitlines() == [
        "[pipeline] invalid configuration: generation.n_samples=2.0: an integer is expected; "
        "write 2"
    ]


def test_a_key_nothing_resembles_points_to_the_key_listing():
    problem = unknown_key_problem(["xyzzy=1"])
    assert problem.startswith("unknown key 'xyzzy'; no config key or group") and "+" not in problem


def test_multirun_syntax_and_a_real_config_group_added_with_plus_still_run(tmp_path):
    done = cli(
        "-m",
        "stage=plan",
        f"output_root={tmp_path}",
        "dataset=triviaqa_bundled,maqa_bundled",
        "hydra.job.chdir=false",
        "~report_models",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "smollm2-135m/maqa_bundled" in done.stdout
        and "smollm2-135m/triviaqa_bundled" in done.stdout
    )


# -- offline --------------------------------------------------------------------------------------


def test_an_unreachable_hub_puts_the_process_offline_once():
    env, asked = {}, []
    assert go_offline_if_unreachable(env, reachable=lambda url: asked.append(url) or False)
    assert asked == ["https://huggingface.co"] and all(env[v] == "1" for v in OFFLINE_VARS)
    env, asked = {"HF_ENDPOINT": "http://mirror:8080/"}, []
    assert not go_offline_if_unreachable(env, reachable=lambda url: asked.append(url) or True)
    assert asked == ["http://mirror:8080"] and not any(v in env for v in OFFLINE_VARS)


@pytest.mark.parametrize(
    "setting", [{"HF_HUB_OFFLINE": "0"}, {"HF_HUB_OFFLINE": "1"}, {"TRANSFORMERS_OFFLINE": "1"}]
)
def test_the_users_own_setting_wins_without_a_probe(setting):
    env = dict(setting)
    assert not go_offline_if_unreachable(env, reachable=lambda url: pytest.fail("probed"))
    assert env == setting


def test_a_hub_that_never_answers_counts_as_unreachable_within_the_timeout():
    import socket

    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        started = time.monotonic()
        assert not hub_reachable(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3)
        assert time.monotonic() - started < 2
    assert not hub_reachable("http://127.0.0.1:9", timeout=0.3)  # refused


def test_the_command_line_goes_offline_with_one_line_when_the_hub_is_unreachable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARS}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", WANDB_MODE="offline")
    done = cli("stage=plan", f"output_root={tmp_path}", "dataset=maqa_bundled", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "[offline]" in line]
    assert len(said) == 1 and "HF_HUB_OFFLINE=1" in said[0]


# -- the report -----------------------------------------------------------------------------------


def test_a_report_over_no_cells_names_the_folder_and_what_to_run(tmp_path):
    done = cli("stage=report", f"output_root={tmp_path}", "wandb.enabled=false")
    assert done.returncode == 2
    out = done.stdout + done.stderr
    assert f"no cells under {tmp_path / 'default'}" in out and "run the cells first" in out
    assert f"python -m pipeline -m experiment=default output_root={tmp_path}" in out
    assert "Traceback" not in out and not (tmp_path / "results").exists()


def _snapshot(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_a_report_goes_under_output_root_never_into_the_repositorys_results(tmp_path):
    """A one-cell run with its own output_root overwrote 50 files of the committed results/."""
    (tmp_path / "default" / "smollm2-135m" / "maqa_bundled").mkdir(parents=True)  # one empty cell
    before = _snapshot(REPO / "results")
    done = cli("stage=report", f"output_root={tmp_path}", "wandb.enabled=false")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _snapshot(REPO / "results") == before
    assert (tmp_path / "results" / "tables" / "generation.md").exists()
    assert f"results in {tmp_path / 'results'}" in done.stdout + done.stderr


def test_make_reproduce_still_writes_the_repositorys_results():
    done = subprocess.run(
        ["make", "-n", "reproduce"], cwd=REPO, capture_output=True, text=True, check=False
    )
    line = [x for x in done.stdout.splitlines() if "-m pipeline" in x]
    assert line and f"results_dir={REPO}/results" in line[-1], done.stdout + done.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_a_short_usage_page_that_writes_nothing(tmp_path, flag):
    env = {**os.environ}
    env.pop("HF_HUB_OFFLINE", None)  # a probe of the hub would go offline and say so
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", flag],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("usage: taskaware") and len(lines) < 40
    for named in (
        "taskaware doctor",
        "taskaware serve",
        "taskaware-score",
        "experiment=",
        "--hydra-help",
        "--cfg job",
    ):
        assert named in done.stdout, named
    assert list(tmp_path.iterdir()) == []  # no outputs/ folder, no log


def test_an_interpolation_that_cannot_be_resolved_is_one_line_and_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NOPE_TASKAWARE_X"}
    env.update(HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    done = cli(
        "stage=plan",
        f"output_root={tmp_path}",
        "generation.n_samples=${oc.env:NOPE_TASKAWARE_X}",
        env=env,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in said, said[-2000:]
    assert "generation.n_samples cannot be resolved" in said
