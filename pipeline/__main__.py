"""`taskaware [stage=...] [experiment=...] [model=...] [dataset=...] [-m ...]` (the console
script; `python -m pipeline ...` is the same command)."""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from pipeline.config import register_configs
from pipeline.driver.job import in_sweep, run
from pipeline.runtime.errors import PipelineError
from pipeline.runtime.resources import conf_path

register_configs()
log = logging.getLogger("pipeline")


def refuse_config_secrets(cfg: DictConfig) -> None:
    """A URL credential written in a config file (the command line's were refused before Hydra
    ran): Hydra has saved it with the run's configs, so those copies are redacted, then the
    run stops with one line (exit 2)."""
    from pathlib import Path

    from hydra.core.hydra_config import HydraConfig

    from pipeline.config.checks import config_problem
    from pipeline.runtime.secrets import redact_files

    if (found := config_problem(cfg)) is None:
        return
    problem, secrets = found
    runtime = HydraConfig.get()
    saved = [
        *Path(runtime.runtime.output_dir).rglob("*.yaml"),
        *Path(runtime.sweep.dir).glob("multirun.yaml"),
    ]
    redact_files(saved, secrets)
    log.error("invalid configuration: %s (the run's saved configs were redacted)", problem)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path=conf_path(), config_name="config")
def main(cfg: DictConfig) -> None:
    from pipeline.runtime.errors import naming_a_full_disk
    from pipeline.runtime.extras import naming_the_extra
    from pipeline.runtime.stopping import REQUEUE_EXIT, StopRequested, stopping_cleanly

    refuse_config_secrets(cfg)
    try:
        with (
            stopping_cleanly(exiting=not in_sweep()),
            naming_the_extra(),
            naming_a_full_disk(str(cfg.output_root)),
        ):
            run(cfg)
    except StopRequested as stop:
        # every write is atomic: the shard in flight is dropped whole, the rest is kept
        log.error(
            "%s: stopped cleanly (what was written is kept); rerun the same command to "
            "resume. Exit %d asks SLURM to requeue (RequeueExit=%d)",
            stop,
            REQUEUE_EXIT,
            REQUEUE_EXIT,
        )
        sys.exit(REQUEUE_EXIT)
    except PipelineError as err:
        # The message says what is wrong and how to fix it: no traceback for the user. In a
        # sweep the job still fails (Hydra reports it and the other jobs are unaffected).
        log.error("%s", err)
        if in_sweep():
            raise
        sys.exit(2)


def check_output_root(argv: list[str]) -> str | None:
    """Hydra creates its run folder under output_root before any of our checks: an unwritable
    one would end in its traceback. The problem in one line, or None."""
    from pathlib import Path

    given = [a.split("=", 1)[1] for a in argv if a.startswith(("output_root=", "+output_root="))]
    root = given[-1] if given else "outputs"
    if "${" in root or "," in root:  # interpolated or a sweep over roots: Hydra resolves it
        return None
    try:
        Path(root).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return (
            f"output_root={root!r}: cannot create it ({exc.strerror}); choose a writable "
            "output_root"
        )
    return None


def check_launcher(argv: list[str]) -> str | None:
    """The SLURM launchers come with the `paper` extra (submitit): without it Hydra would only
    say it cannot load `hydra/launcher/per_cell_slurm`. The problem in one line, or None."""
    from pipeline.runtime.extras import install_fix, missing

    launchers = [a.split("=", 1)[1] for a in argv if a.startswith("hydra/launcher=")]
    if not launchers or launchers[-1] in ("local", "basic"):
        return None
    if absent := missing("submitit", "hydra_plugins.hydra_submitit_launcher"):
        return (
            f"hydra/launcher={launchers[-1]} needs {', '.join(absent)}, not installed: "
            f"{install_fix('paper')}"
        )
    return None


def usage() -> str:
    """`taskaware --help`: the commands, the common overrides and where each group's choices
    and Hydra's own help are (built from conf/ on disk: nothing is composed or probed)."""
    from pipeline.runtime.resources import conf_dir

    conf = conf_dir()

    def choices(group: str) -> str:
        return ", ".join(sorted(p.stem for p in (conf / group).glob("*.yaml")))

    from pipeline.tasks import task_folders

    return f"""usage: taskaware [KEY=VALUE ...] [-m]     the pipeline (a Hydra app; `python -m pipeline`)
       taskaware doctor [KEY=VALUE ...]   what this configuration needs here, and the fixes
       taskaware serve --upstream URL     task-aware answers behind an OpenAI-compatible API
       taskaware-score FILE --task T      score responses you already sampled (--help for more)

Common overrides:
  stage=all|generate|map|decide|uq|evaluate|report|plan   (default all; plan prints the cells)
  experiment={choices("experiment")}
  model={choices("model")}
  dataset={choices("dataset")}
  task={", ".join(sorted(task_folders()))}   (the dataset chooses one)
  backend={choices("backend")}
  generation.n_samples=20  dataset.limit=N  output_root=DIR  wandb.enabled=false
  hydra/launcher=local|slurm   -m   (a sweep: comma lists, e.g. model=qwen3-4b,gemma-3-4b-it)

Examples:
  taskaware stage=plan experiment=paper        the paper's 25 cells, their GPUs and hours
  taskaware doctor experiment=paper hydra/launcher=slurm
  taskaware dataset=triviaqa_bundled dataset.limit=5 generation.n_samples=5

Every key and its value: `taskaware --cfg job` (the composed config); Hydra's own options:
`taskaware --hydra-help`. Docs: README.md and docs/ (docs/README.md lists them)."""


def cli() -> None:
    """The command line (`taskaware`, `python -m pipeline`): the checks that must run before
    Hydra writes anything, then the Hydra app. `taskaware doctor [overrides...]` checks instead
    what that configuration needs on this node (pipeline/driver/doctor.py) and exits 0 when it can run;
    `taskaware serve --upstream URL ...` serves task-aware answers (pipeline/serve/cli.py)."""
    if sys.argv[1:] in (["--help"], ["-h"], ["help"]):  # Hydra's page dumps the whole config
        print(usage())
        sys.exit(0)
    if sys.argv[1:2] == ["doctor"]:
        from pipeline.driver.doctor import main as doctor

        sys.exit(doctor(sys.argv[2:]))
    if sys.argv[1:2] == ["serve"]:
        from pipeline.serve.cli import main as serve

        sys.exit(serve(sys.argv[2:]))
    from pipeline.runtime.stopping import install_early_stop

    install_early_stop("[pipeline] ")  # the Hydra app's runs (serve handles its own signals)
    from pipeline.driver.overrides import syntax_problem, unknown_key_problem, value_type_problem
    from pipeline.runtime.offline import go_offline_if_unreachable
    from pipeline.runtime.secrets import argv_problem

    # credentials first: the other checks' messages quote values
    for check in (
        argv_problem,
        syntax_problem,
        unknown_key_problem,
        value_type_problem,
        check_output_root,
        check_launcher,
    ):
        if (problem := check(sys.argv[1:])) is not None:
            print(f"[pipeline] invalid configuration: {problem}", file=sys.stderr)
            sys.exit(2)
    go_offline_if_unreachable()  # before any hub library loads: no minutes of retries offline
    main()


if __name__ == "__main__":
    cli()
