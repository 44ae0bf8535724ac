"""Chaos run (issue 23): attack the pipeline the ways a cluster and its users do, and count what
happens. Bounded (a tiny random model, 3 prompts) and offline, so CI can run it.

    python scripts/chaos.py [--quick] [--keep DIR]

Every try of an attack ends in one of three outcomes:

- identical: after the attack and a rerun, every `*.parquet` artifact of the cell equals the one
  a clean run wrote (pandas.testing.assert_frame_equal over `ArtifactStore.read`);
- refused: a clear error (in-process a PipelineError / ArtifactError / ConfigError; on the
  command line exit status 2 and no traceback);
- wrong: anything else (other artifacts and no error, a traceback, a crash, a hang).

Prints progress to stderr, then the table (Markdown) and a totals line to stdout. Exits 1 when
any try went wrong, else 0. `--quick` runs a few tries per attack (the test suite's mode);
`--keep DIR` works in DIR and leaves it there (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the package, the scorer tests' bad rows (tests.score) and the stand-in server (scripts/)
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
# Offline like the test suite: nothing may reach the network, the hub or W&B.
for _var, _value in (
    ("HF_HUB_OFFLINE", "1"),
    ("HF_DATASETS_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("WANDB_MODE", "offline"),
    ("TOKENIZERS_PARALLELISM", "false"),
):
    os.environ.setdefault(_var, _value)

import pandas as pd  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.core.global_hydra import GlobalHydra  # noqa: E402
from hydra.errors import HydraException  # noqa: E402
from omegaconf.errors import OmegaConfBaseException  # noqa: E402

import pipeline.artifacts.store as store_module  # noqa: E402
from pipeline.artifacts.schema import PRODUCER  # noqa: E402
from pipeline.artifacts.stage import CELL_STAGES, STAGES, run_stage, stage_key  # noqa: E402
from pipeline.artifacts.store import ArtifactStore, cell_lock  # noqa: E402
from pipeline.config import (
    register_configs,  # noqa: E402
    resolve_cell,
)
from pipeline.runtime.errors import PipelineError  # noqa: E402

IDENTICAL, REFUSED, WRONG = "identical", "refused", "wrong"
SHARD_GROUPS = ("samples", "decodes", "ptrue")  # what the generate stage writes per shard
T0 = time.monotonic()


def say(message: str) -> None:
    print(f"[chaos {time.monotonic() - T0:6.1f}s] {message}", file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    """The error's message on one line (ConfigError lists its problems on indented lines)."""
    return " ".join(str(exc).split())[:240] or type(exc).__name__


@dataclass
class Row:
    """One attack kind: how many tries ended in which outcome (and what the wrong ones did)."""

    attack: str
    tries: int = 0
    identical: int = 0
    refused: int = 0
    wrong: int = 0
    failures: list[str] = field(default_factory=list)

    def record(self, what: str, outcome: str, detail: str = "", quiet: bool = False) -> None:
        self.tries += 1
        setattr(self, outcome, getattr(self, outcome) + 1)
        if outcome == WRONG:
            self.failures.append(f"{what}: {detail}")
        if not quiet or outcome == WRONG:
            say(
                f"{self.attack}: {what} -> {outcome.upper() if outcome == WRONG else outcome}"
                + (f" ({detail})" if detail else "")
            )


def outcome_of(
    fn: Callable[[], tuple[str, str]], refusals: tuple[type[BaseException], ...] = (PipelineError,)
) -> tuple[str, str]:
    """Run one try: what it returns, `refused` for a clear error, `wrong` for any other one."""
    try:
        return fn()
    except refusals as exc:
        return REFUSED, one_line(exc)
    except Exception as exc:  # noqa: BLE001  a traceback the user would have seen
        return WRONG, f"{type(exc).__name__}: {one_line(exc)}"


class Crash(Exception):
    """Raised in place of a file commit: the process dies right there."""


@contextlib.contextmanager
def crash_before(n: int) -> Iterator[None]:
    """The store's n-th file commit (os.replace) raises Crash (tests/pipeline/test_reliability.py)."""
    real, done = os.replace, []

    def replace(src, dst):
        if len(done) == n:
            raise Crash(f"killed before writing {Path(dst).name}")
        done.append(dst)
        return real(src, dst)

    store_module.os.replace = replace
    try:
        yield
    finally:
        store_module.os.replace = real


@contextlib.contextmanager
def killed_at_call(module, name: str, n: int) -> Iterator[None]:
    """`module.name`'s n-th call raises KeyboardInterrupt (not caught by any handler: a kill)."""
    real, calls = getattr(module, name), []

    def wrapper(*args, **kwargs):
        if len(calls) == n:
            raise KeyboardInterrupt(f"killed in {name} call {n}")
        calls.append(1)
        return real(*args, **kwargs)

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, real)


@dataclass
class Chaos:
    """The shared state of a chaos run: the work folder, the tiny model, the clean reference."""

    work: Path
    quick: bool
    model: Path = Path()
    clean_cell: Path = Path()  # a finished triviaqa_bundled cell (in-process clean run)
    maqa_cell: Path = Path()  # a finished maqa_bundled cell of the same settings
    reference: dict[str, pd.DataFrame] = field(default_factory=dict)
    procs: list[subprocess.Popen] = field(default_factory=list)
    _n: int = 0
    _clean_tables: dict | None = None

    def root(self, tag: str) -> Path:
        """A fresh folder for one try (its own output_root, results_dir and cache_dir)."""
        self._n += 1
        path = self.work / f"{self._n:03d}-{tag}"
        path.mkdir(parents=True)
        return path

    def overrides(self, root: Path, *extra: str) -> list[str]:
        # tests/pipeline/test_reliability.py's tiny cell; one torch thread (the other users of
        # the machine keep theirs, and a rerun computes with the threads of the clean run)
        return [
            f"model.path={self.model}",
            "model.name=tiny",
            "model.dtype=float32",
            "model.temperature=1.0",
            "dataset=triviaqa_bundled",
            "dataset.limit=3",
            "dataset.max_new_tokens=4",
            "generation.n_samples=2",
            "generation.shard_size=2",
            "generation.strategies=[greedy,ar]",
            "backend.num_threads=1",
            "wandb.enabled=false",
            f"wandb.dir={root}",
            f"output_root={root / 'out'}",
            f"results_dir={root / 'results'}",
            f"cache_dir={root / 'cache'}",
            *extra,
        ]

    def cfg(self, root: Path, *extra: str):
        return compose_cfg(self.overrides(root, *extra))

    def cell(self, root: Path) -> Path:
        return root / "out" / "default" / "tiny" / "triviaqa_bundled"

    def copy_clean(self, root: Path) -> Path:
        cell = self.cell(root)
        shutil.copytree(self.clean_cell, cell)
        return cell

    def compare(self, cell: Path) -> str | None:
        """None when every parquet artifact of `cell` equals the clean run's, else what differs."""
        store = ArtifactStore(cell)
        names = sorted(set(self.reference) | {p.stem for p in cell.glob("*.parquet")})
        for name in names:
            if name not in self.reference:
                return f"{name} is not an artifact of a clean run"
            try:
                got = store.read(name)
            except Exception as exc:  # noqa: BLE001  the rerun said done but left this
                return f"{name} unreadable after the rerun: {one_line(exc)}"
            try:
                pd.testing.assert_frame_equal(got, self.reference[name], obj=name)
            except AssertionError as exc:
                return " ".join(str(exc).split())[:300]
        return None

    def clean_tables(self) -> dict:
        """The tables of a report over the clean cell alone (built once)."""
        if self._clean_tables is None:
            from pipeline.reporting import build_report

            root = self.root("report-clean")
            self.copy_clean(root)
            build_report(resolve_cell(self.cfg(root)))
            self._clean_tables = read_tables(root / "results")
        return self._clean_tables

    def verdict(self, cell: Path) -> tuple[str, str]:
        problem = self.compare(cell)
        return (IDENTICAL, "") if problem is None else (WRONG, f"no error, but {problem}")

    # -- the command line, as a user runs it
    def spawn(self, root: Path, args: list[str], tag: str = "run") -> subprocess.Popen:
        out = open(root / f"{tag}.out", "w")  # files, not pipes: a killed child blocks nothing
        err = open(root / f"{tag}.err", "w")
        hydra_dir = f"hydra.run.dir={root / 'hydra' / tag}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline", *args, hydra_dir],
            cwd=REPO,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        out.close()
        err.close()
        self.procs.append(proc)
        return proc

    def logs(self, root: Path, tag: str = "run") -> str:
        return (root / f"{tag}.out").read_text(errors="replace") + (root / f"{tag}.err").read_text(
            errors="replace"
        )

    def cli(
        self, root: Path, args: list[str], tag: str = "run", timeout: float = 600
    ) -> tuple[int, str]:
        proc = self.spawn(root, args, tag)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(proc)
            rc = -1
        return rc, self.logs(root, tag)


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def compose_cfg(overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=overrides)


def run_cell(cfg) -> dict[str, dict]:
    """`stage=all` of one cell in-process, as pipeline.driver.job.run does it (without the report)."""
    store = ArtifactStore(resolve_cell(cfg).root)
    store.root.mkdir(parents=True, exist_ok=True)
    with cell_lock(store.root):
        return {name: run_stage(name, resolve_cell(cfg), store) for name in CELL_STAGES}


def cli_refused(rc: int, logs: str) -> tuple[str, str]:
    """A command line's refusal: exit status 2 and no traceback."""
    if "Traceback" in logs:
        return WRONG, f"exit {rc} with a traceback: {logs[logs.find('Traceback') :][:200]!r}"
    if rc == 2:
        at = max(logs.find("ERROR"), logs.find("error:"), logs.find("[pipeline]"))
        return REFUSED, " ".join(logs[max(at, 0) :].split())[:200]
    return WRONG, f"exit {rc}, expected 2" + (" (the value was taken)" if rc == 0 else "")


# ----------------------------------------------------------------------------------------------
# setup


def setup(ctx: Chaos) -> None:
    """The tiny model, then a clean triviaqa cell (the reference) and a clean maqa cell."""
    import importlib.util

    from pipeline.runtime.devices import configure_torch_threads

    spec = importlib.util.spec_from_file_location(
        "make_tiny_model", REPO / "scripts" / "make_tiny_model.py"
    )
    make_tiny_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_tiny_model)
    ctx.model = ctx.work / "tiny-model"
    with contextlib.redirect_stdout(sys.stderr):
        make_tiny_model.main([str(ctx.model), "--train-steps", "0"])
    configure_torch_threads(1)  # what backend.num_threads=1 makes app.run do
    root = ctx.root("clean")
    run_cell(ctx.cfg(root))
    ctx.clean_cell = ctx.cell(root)
    store = ArtifactStore(ctx.clean_cell)
    ctx.reference = {p.stem: store.read(p.stem) for p in sorted(ctx.clean_cell.glob("*.parquet"))}
    maqa = ctx.root("maqa")
    run_cell(ctx.cfg(maqa, "dataset=maqa_bundled"))
    ctx.maqa_cell = maqa / "out" / "default" / "tiny" / "maqa_bundled"
    say(
        f"setup: tiny model and clean cells ready ({len(ctx.reference)} artifacts: "
        f"{', '.join(ctx.reference)})"
    )


# ----------------------------------------------------------------------------------------------
# 1. SIGKILL during a command-line run


def attack_sigkill(ctx: Chaos) -> Row:
    """`python -m pipeline stage=all` killed -9 at delays spread over a clean command-line run's
    duration (that run must give the reference cell too), and once right after the first
    generation shard is written; then the cell rerun to completion must be the clean one. The
    rerun is in-process (the same stages under the cell's lock): a second process start per
    kill would double the attack's time."""
    row = Row("SIGKILL during a run")
    kills: list[tuple[str, float | None]] = [("when the first shard is written", None)]
    if not ctx.quick:
        root = ctx.root("sigkill-clean")
        t0 = time.monotonic()
        rc, logs = ctx.cli(root, ctx.overrides(root, "stage=all"))
        duration = time.monotonic() - t0
        if rc != 0 or "Traceback" in logs:
            row.record("clean command-line run", WRONG, f"exit {rc}: {logs[-300:]!r}")
        else:
            row.record("clean command-line run (no kill)", *ctx.verdict(ctx.cell(root)))
        n = 6
        kills += [
            (f"after {duration * (i + 0.5) / n:.1f} s of {duration:.0f}", duration * (i + 0.5) / n)
            for i in range(n)
        ]
    for label, delay in kills:
        root = ctx.root("sigkill")
        proc = ctx.spawn(root, ctx.overrides(root, "stage=all"))
        note = wait_then_kill(proc, ctx.cell(root), delay) or on_disk(ctx.cell(root))

        def rerun(root=root):
            run_cell(ctx.cfg(root))
            return ctx.verdict(ctx.cell(root))

        outcome, detail = outcome_of(rerun)
        row.record(f"killed {label}{note}", outcome, detail)
    return row


def on_disk(cell: Path) -> str:
    """What a killed run left: committed artifacts and generation shards."""
    artifacts = len(list(cell.glob("*.manifest.json")))
    shards = len(list(cell.glob("*.shards/*/shard-*.json")))
    return f" (on disk: {artifacts} artifact(s), {shards} shard file(s))"


def wait_then_kill(proc: subprocess.Popen, cell: Path, delay: float | None) -> str:
    """SIGKILL the run after `delay` seconds (None: once a generation shard is on disk)."""
    deadline = time.monotonic() + (delay if delay is not None else 600)
    while time.monotonic() < deadline and proc.poll() is None:
        if delay is None and list(cell.glob("samples.shards/*/shard-00000.json")):
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        return f" (it had ended, exit {proc.returncode})"
    kill(proc)
    return ""


# ----------------------------------------------------------------------------------------------
# 2. generation shards


def attack_shards(ctx: Chaos) -> Row:
    """A generate stage killed after writing shards, then resumed with another shard size, or
    with a shard swapped for another or truncated: the artifacts of a clean run."""
    row = Row("generation shards")
    # (what, crash before the n-th commit, overrides of the killed run, damage before the resume,
    # overrides of the resume). 3 groups x (parquet + sidecar) per shard.
    cases = [
        ("shard_size 1 -> 2 after 3 shards", 18, ["generation.shard_size=1"], None, []),
        ("shard_size 1 -> 2 after 1 shard", 6, ["generation.shard_size=1"], None, []),
        ("shard_size 2 -> 1 after 1 shard", 6, [], None, ["generation.shard_size=1"]),
        *[(f"{g} shards 0 and 1 swapped", 12, [], ("swap", g), []) for g in SHARD_GROUPS],
        *[(f"{g} shard 0 truncated", 12, [], ("truncate", g), []) for g in SHARD_GROUPS],
    ]
    if ctx.quick:
        cases = [cases[0], cases[3], cases[-1]]
    for what, n, killed_with, damage, resumed_with in cases:
        root = ctx.root("shards")

        def attack(
            root=root, n=n, killed_with=killed_with, damage=damage, resumed_with=resumed_with
        ):
            cfg = ctx.cfg(root, *killed_with)
            store = ArtifactStore(resolve_cell(cfg).root)
            with crash_before(n):
                try:
                    run_stage("generate", resolve_cell(cfg), store)
                except Crash:
                    pass
                else:
                    return WRONG, f"the crash before commit {n} never came"
            if damage is not None:
                kind, group = damage
                key = stage_key(STAGES["generate"], resolve_cell(cfg), store)[0]
                first, second = (store.shard_path(group, key, i) for i in (0, 1))
                if kind == "swap":
                    a, b = first.read_bytes(), second.read_bytes()
                    first.write_bytes(b)
                    second.write_bytes(a)
                else:
                    first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])
            run_cell(ctx.cfg(root, *resumed_with))
            return ctx.verdict(store.root)

        row.record(what, *outcome_of(attack))
    return row


# ----------------------------------------------------------------------------------------------
# 3. damaged artifacts


DAMAGES = ("truncate", "zeros", "garbage", "other artifact")


def damage_file(path: Path, kind: str, other: Path) -> None:
    data = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "zeros":
        path.write_bytes(b"\0" * len(data))
    elif kind == "garbage":
        path.write_bytes(random.Random(len(data)).randbytes(len(data)))
    else:
        shutil.copyfile(other, path)


def attack_damaged(ctx: Chaos) -> Row:
    """Every parquet artifact of a finished cell damaged each way, then the cell stages rerun."""
    row = Row("damaged artifacts")
    names = sorted(ctx.reference)
    cases = [(name, kind) for name in names for kind in DAMAGES]
    if ctx.quick:  # each damage once, on artifacts of different stages
        cases = [(names[(i * 3) % len(names)], kind) for i, kind in enumerate(DAMAGES)]
    for name, kind in cases:
        root = ctx.root("damaged")
        cell = ctx.copy_clean(root)
        other = cell / f"{names[(names.index(name) + 1) % len(names)]}.parquet"
        damage_file(cell / f"{name}.parquet", kind, other)

        def rerun(root=root, cell=cell):
            run_cell(ctx.cfg(root))
            return ctx.verdict(cell)

        label = f"{name} <- {other.stem}" if kind == "other artifact" else f"{name} {kind}"
        row.record(label, *outcome_of(rerun))
    return row


# ----------------------------------------------------------------------------------------------
# 4. foreign artifacts


# what the report reads of a (non-maqa) cell, besides cache keys (pipeline/reporting/collect.py)
REPORT_READS = ("quality", "uq_scores", "uncertainty")


def attack_foreign(ctx: Chaos) -> Row:
    """An artifact (parquet + manifest) of the maqa cell copied into the triviaqa cell: what
    reads it, run alone as `stage=X` would (the report, then each later cell stage), must refuse
    it or recompute it: its tables those of a clean report, its outputs those of a clean run;
    then `stage=all` must give the clean cell."""
    from pipeline.reporting import build_report

    row = Row("foreign artifacts")
    names = sorted(p.stem for p in ctx.maqa_cell.glob("*.parquet"))
    if ctx.quick:
        names = [n for n in ("samples", "latents", "quality") if n in names]
    for name in names:
        root = ctx.root("foreign")
        cell = ctx.copy_clean(root)
        for suffix in (".parquet", ".manifest.json"):
            shutil.copyfile(ctx.maqa_cell / f"{name}{suffix}", cell / f"{name}{suffix}")

        def attack(root=root, cell=cell, name=name):
            cfg, store = ctx.cfg(root), ArtifactStore(cell)
            if name in REPORT_READS:  # first: the report changes nothing in the cell
                build_report(resolve_cell(cfg))
                problem = compare_tables(read_tables(root / "results"), ctx.clean_tables())
                if problem is not None:
                    return WRONG, f"stage=report read the maqa {name}, exit 0: {problem}"
            later = CELL_STAGES[CELL_STAGES.index(PRODUCER[name]) + 1 :]
            for stage in later:
                result = run_stage(stage, resolve_cell(cfg), store)
                if result["skipped"]:
                    continue
                for out in STAGES[stage].outputs:
                    try:
                        pd.testing.assert_frame_equal(store.read(out), ctx.reference[out])
                    except AssertionError:
                        return WRONG, (
                            f"stage={stage} read the maqa {name} and wrote another {out}, exit 0"
                        )
            run_cell(cfg)
            return ctx.verdict(cell)

        row.record(f"maqa {name}", *outcome_of(attack))
    return row


# ----------------------------------------------------------------------------------------------
# 5. bad config values


# (override, the stage it is given to): refused by validate, by Hydra's composition, by the
# output_root check before Hydra, or by the first stage that reads it
BAD_VALUES = [
    ("backend.device=quantum", "plan"),
    ("device=gpu7", "plan"),
    ("model.dtype=float7", "plan"),
    ("model.name=../../../x", "plan"),
    ("model.name=a/b", "plan"),
    ("dataset.name=a/b", "plan"),
    ("+foo=bar", "plan"),
    ("evaluation.targets=[nobody]", "plan"),
    ("generation.n_samples=0", "plan"),
    ("generation.n_samples=-3", "plan"),
    ("dataset.limit=-1", "plan"),
    ("dataset.limit=0", "plan"),
    ("evaluation.max_rejection=0", "plan"),
    ("model.top_p=1.5", "plan"),
    ("task.extractor.max_failed_share=2", "plan"),
    ("uq.estimators=[msp,lexical_similarity]", "plan"),
    ("generation.shard_size=0", "plan"),
    ("dataset.max_new_tokens=0", "plan"),
    ("model.temperature=-1", "plan"),
    ("backend.batch_size=0", "plan"),
    ("evaluation.ci_alpha=1", "plan"),
    ("stage=generat", "plan"),
    ("task.equivalence.backend=magic", "plan"),
    ("generation.strategies=[telepathy]", "plan"),
    ("task.space=hyperbolic", "plan"),
    ("task.equivalence.threshold=2", "plan"),
    ("evaluation.ties=random", "plan"),
    ("backend.name=tensorflow", "plan"),
    ("generation.beam_width=0", "plan"),
    ("plugins=[no_such_module_chaos]", "plan"),
    ("task.prompt=hello", "plan"),
    ("evaluation.n_bootstrap=-1", "plan"),
    ("backend.num_threads=0", "plan"),
    ("output_root=/proc/x", "plan"),
    ("model.path=/nonexistent", "generate"),
    ("report_models=[nobody]", "report"),
    # Hydra refuses these while composing (in-process only: its own exit status is 1)
    ("generation.n_samples=many", "plan"),
    ("model=gpt-5", "plan"),
    ("generation.n_sampels=5", "plan"),
    ("dataset=nope", "plan"),
    ("experiment=../x", "plan"),
    # round 3 (issue 53): Hydra's type errors (its exit 1) and values that are not finite
    ("generation.n_samples=2.0", "plan"),
    ("dataset.limit=1e9", "plan"),
    ("dataset.max_new_tokens=nan", "plan"),
    ("model.temperature=inf", "plan"),
    ("model.top_p=nan", "plan"),
    # round 3b (the independent attack run)
    ("generation.n_samples=null", "plan"),
    ("~generation.n_samples", "plan"),
    ("generation=5", "plan"),
    ("generation.n_samples=${oc.env:CHAOS_NO_SUCH_VARIABLE}", "plan"),
]
CLI_VALUES = [
    "generation.n_samples=0",
    "generation.n_samples=2.0",
    "dataset.limit=1e9",
    "dataset.max_new_tokens=nan",
    "model.temperature=inf",
    "generation.n_samples=null",
    "~generation.n_samples",
    "generation=5",
    "generation.n_samples=${oc.env:CHAOS_NO_SUCH_VARIABLE}",
    "output_root=/proc/x",
    "backend.device=quantum",
    "+foo=bar",
    "model.name=../../../x",
    "dataset.limit=-1",
    "model.path=/nonexistent",
    "report_models=[nobody]",
]


def config_in_process(args: list[str]) -> tuple[str, str]:
    """What `python -m pipeline ARGS` checks before any work, in this process: `wrong` when
    ARGS are taken."""
    from pipeline.__main__ import check_output_root
    from pipeline.artifacts.stage import stages_to_run
    from pipeline.config import validate
    from pipeline.driver.assets import check_assets
    from pipeline.driver.overrides import value_type_problem
    from pipeline.reporting import build_report

    for check in (check_output_root, value_type_problem):
        if (problem := check(args)) is not None:
            return REFUSED, problem
    try:
        cfg = compose_cfg(args)
    except (HydraException, OmegaConfBaseException) as exc:
        return REFUSED, f"Hydra: {one_line(exc)}"

    def checks():
        validate(cfg)
        if cfg.stage in CELL_STAGES:
            check_assets(
                resolve_cell(cfg),
                stages_to_run(
                    resolve_cell(cfg), ArtifactStore(resolve_cell(cfg).root), (cfg.stage,)
                ),
            )
        elif cfg.stage == "report":
            build_report(resolve_cell(cfg))
        return WRONG, "taken without an error"

    return outcome_of(checks)


def names_the_value(outcome: str, detail: str, value: str) -> tuple[str, str]:
    """A refusal counts when it names the key given the bad value: one refused for another
    reason (a broken base configuration) would hide that the value itself is never checked."""
    key = value.split("=", 1)[0].lstrip("+")
    if outcome == REFUSED and key not in detail:
        return WRONG, f"refused, but not for {key}: {detail}"
    return outcome, detail


def attack_config(ctx: Chaos) -> Row:
    """About 40 bad values in-process through the command line's checks, a few through the
    command line itself (exit 2, no traceback, nothing written)."""
    row = Row("bad config values")
    root = ctx.root("config")
    outcome, detail = config_in_process(ctx.overrides(root, "stage=plan"))
    if detail != "taken without an error":  # the control: the base settings are fine
        row.record("the base configuration (control)", WRONG, f"{outcome}: {detail}")
    for value, stage in BAD_VALUES:
        root = ctx.root("config")
        outcome, detail = config_in_process(ctx.overrides(root, f"stage={stage}", value))
        row.record(f"{value} (in-process)", *names_the_value(outcome, detail, value))
    stage_of = dict(BAD_VALUES)
    for value in CLI_VALUES[:3] if ctx.quick else CLI_VALUES:
        root = ctx.root("config-cli")
        rc, logs = ctx.cli(
            root, ctx.overrides(root, f"stage={stage_of[value]}", value), timeout=300
        )
        outcome, detail = cli_refused(rc, logs)
        if outcome == REFUSED and list(root.rglob("*.parquet")):
            outcome, detail = WRONG, "exit 2, but artifacts were written"
        key = value.split("=", 1)[0].lstrip("+")
        if outcome == REFUSED and key not in logs:
            outcome, detail = WRONG, f"exit 2, but the error does not name {key}: {detail}"
        row.record(f"{value} (command line)", outcome, detail)
    return row


# ----------------------------------------------------------------------------------------------
# 6. hostile scorer input


def mixed_input(path: Path) -> tuple[list[str], dict[int, tuple]]:
    """tests/score/test_score_bad_rows.py's `mixed` file: 20 good rows, 200 bad ones (every kind
    of BAD in turn, the first on line 6) and a blank line 10. Returns good ids, bad lines."""
    from tests.score.test_score_bad_rows import write_mixed

    return write_mixed(path)


def attack_scorer(ctx: Chaos) -> Row:
    """Each row of the file is a try: a bad row must be listed as skipped (refused), a good one
    scored with the values worked out by hand (identical); the file with --strict is refused."""
    from pipeline.scorer.readers import ScoreInputError
    from pipeline.scorer.run import score

    row = Row("hostile scorer input")
    root = ctx.root("scorer")
    path = root / "mixed.jsonl"
    good_ids, bad = mixed_input(path)
    overrides = [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = score(path, "reals", out=root / "res.parquet", overrides=overrides)
    except (PipelineError, ScoreInputError) as exc:  # the whole file refused: good rows lost
        for line in bad:
            row.record(f"bad line {line}", REFUSED, one_line(exc))
        for pid in good_ids:
            row.record(f"good row {pid}", WRONG, f"not scored: {one_line(exc)}")
        return row
    except Exception as exc:  # noqa: BLE001
        row.record("the file", WRONG, f"{type(exc).__name__}: {one_line(exc)}")
        return row
    skipped = {s["line"]: s for s in df.attrs.get("skipped", [])}
    scored_bad = sorted(set(df["prompt_id"]) - set(good_ids))
    refused = 0
    for line, (_field, problem) in sorted(bad.items()):
        s = skipped.get(line)
        if s is not None and problem in s["problem"]:
            refused += 1
            row.record(f"bad line {line}", REFUSED, quiet=True)  # 200 of them: no line each
        else:
            row.record(
                f"bad line {line} ({problem})",
                WRONG,
                "scored as if valid" if s is None else f"skipped as {s['problem']!r}",
            )
    say(
        f"{row.attack}: {refused} of {len(bad)} bad rows listed as skipped; bad ids scored: "
        f"{scored_bad[:5]}"
    )
    by_id = df.set_index("prompt_id")
    for k, pid in enumerate(good_ids):
        if pid not in by_id.index:
            row.record(f"good row {pid}", WRONG, "not scored")
            continue
        r = by_id.loc[pid]
        ok = (
            r["bayes_action"] == 10.0 + k
            and r["bayes_risk"] == 1.0
            and r["quality_bayes_abs_error"] == 0.0
            and r["n_parsed"] == 3
        )
        if ok:
            row.record(f"good row {pid}", IDENTICAL, quiet=True)
        else:
            row.record(f"good row {pid}", WRONG, f"scored {r.to_dict()}")
    say(f"{row.attack}: {row.identical} of {len(good_ids)} good rows scored right")
    # the command line, --strict: one error line naming the first bad line, exit 2
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.score",
            str(path),
            "--task",
            "reals",
            "--strict",
            "--out",
            str(root / "strict.parquet"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcome, detail = cli_refused(res.returncode, res.stdout + res.stderr)
    if outcome == REFUSED:
        detail = res.stderr.strip()[:160]
        if res.stderr.count("\n") != 1:
            outcome, detail = WRONG, f"exit 2 but {res.stderr.count(chr(10))} lines on stderr"
    row.record("the file with --strict (command line)", outcome, detail)
    return row


# ----------------------------------------------------------------------------------------------
# 7. outside calls


def attack_outside_calls(ctx: Chaos) -> Row:
    """LLMClient against the OpenAI-compatible stand-in: null / empty / 503 replies are counted
    failures and cache nothing, so the fixed server is asked again and answers; a swapped or
    truncated cache record is never served."""
    from openai_stand_in import FakeOpenAIServer

    from pipeline.clients.llm_client import LLMClient

    row = Row("outside calls")
    with FakeOpenAIServer() as server:

        def client(cache: Path, **kw) -> LLMClient:
            return LLMClient(
                model="rule-server",
                base_url=server.base_url,
                cache_dir=cache,
                backoff_base=0.01,
                **kw,
            )

        for fault in ("null", "empty", 503):
            cache = ctx.root("llm") / "cache"

            def broken_then_fixed(cache=cache, fault=fault):
                server.state.faults = [fault] * 3
                broken = client(cache, max_retries=2)
                got = broken.complete(["hello"])
                if got != [None] or broken.stats.failures != 1:
                    return WRONG, f"a broken server's reply was taken: {got}, {broken.stats}"
                if list(cache.rglob("*.json")):
                    return WRONG, "a failed call was cached"
                server.state.faults, before = [], server.state.requests
                fixed = client(cache, max_retries=2)
                got = fixed.complete(["hello"])
                if got != ["HELLO"] or server.state.requests != before + 1:
                    return WRONG, f"the fixed server was not asked again: {got}"
                return IDENTICAL, ""

            row.record(f"{fault} replies, then a fixed server", *outcome_of(broken_then_fixed))

        for damage in ("swapped", "truncated"):
            cache = ctx.root("llm") / "cache"

            def damaged_record(cache=cache, damage=damage):
                client(cache).complete(["one", "two"])
                files = {
                    json.loads(f.read_text())["messages"][0]["content"]: f
                    for f in cache.rglob("*.json")
                }
                one = files["one"]
                if damage == "swapped":
                    one.write_text(files["two"].read_text())
                else:
                    one.write_text(one.read_text()[: len(one.read_text()) // 2])
                fresh = client(cache)
                got = fresh.complete(["one"])
                if got != ["ONE"] or fresh.stats.cache_hits != 0:
                    return WRONG, f"a {damage} record was served: {got}"
                return IDENTICAL, ""

            row.record(f"a {damage} cache record", *outcome_of(damaged_record))
    return row


# ----------------------------------------------------------------------------------------------
# 8. damaged pair cache


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def attack_pair_cache(ctx: Chaos) -> Row:
    """The NLI / embedding pair cache (sqlite) truncated, zeroed, garbage, emptied, or with a
    damaged row, then opened: moved aside with a warning and rebuilt, or the row missed."""
    from pipeline.mapping.equivalence import PairCache

    row = Row("damaged pair cache")
    for damage in ("truncated", "zeroed", "garbage", "empty file", "damaged row"):
        root = ctx.root("pairs")

        def attack(root=root, damage=damage):
            cache = PairCache(root)
            keys = {PairCache.key("m", "q", f"a{i}", "b"): [0.1 * i, 0.5] for i in range(50)}
            cache.put_many(keys)
            path, data = cache.path, cache.path.read_bytes()
            if damage == "truncated":
                path.write_bytes(data[: len(data) // 3])
            elif damage == "zeroed":
                path.write_bytes(b"\0" * len(data))
            elif damage == "garbage":
                path.write_bytes(random.Random(1).randbytes(len(data)))
            elif damage == "empty file":
                path.write_bytes(b"")
            else:
                with sqlite3.connect(path) as con:
                    con.execute(
                        "UPDATE pairs SET value = '{not json' WHERE key = ?", (next(iter(keys)),)
                    )
            handler = Captured()
            logging.getLogger("pipeline").addHandler(handler)
            try:
                healed = PairCache(root)
                got = healed.get_many(list(keys))
            finally:
                logging.getLogger("pipeline").removeHandler(handler)
            if any(got[k] != keys[k] for k in got):
                return WRONG, "a damaged cache served other values"
            if damage in ("truncated", "zeroed", "garbage"):
                if not any(str(path) in m and "damaged" in m for m in handler.lines):
                    return WRONG, "no warning naming the damaged file"
                if not list(root.glob("equivalence_pairs.sqlite.damaged-*")):
                    return WRONG, "the damaged file was not moved aside"
            healed.put_many(keys)
            if PairCache(root).get_many(list(keys)) != keys:
                return WRONG, "the rebuilt cache does not hold what was put"
            return IDENTICAL, ""

        row.record(damage, *outcome_of(attack))
    return row


# ----------------------------------------------------------------------------------------------
# 9. killed report


def read_tables(results: Path) -> dict[str, object]:
    tables = {}
    for path in sorted((results / "tables").glob("*")):
        tables[path.name] = (
            pd.read_csv(path) if path.suffix == ".csv" else path.read_text(encoding="utf-8")
        )
    return tables


def compare_tables(got: dict, want: dict) -> str | None:
    if sorted(got) != sorted(want):
        return f"tables {sorted(set(got) ^ set(want))} differ in presence"
    for name, table in want.items():
        if isinstance(table, pd.DataFrame):
            try:
                pd.testing.assert_frame_equal(got[name], table, obj=name)
            except AssertionError as exc:
                return " ".join(str(exc).split())[:300]
        elif got[name] != table:
            return f"{name} differs from the clean report's"
    return None


def attack_report(ctx: Chaos) -> Row:
    """The report killed while it rewrites its tables or figures for other settings, then rerun
    with the first settings: redone (not "up to date"), tables equal to the clean report's."""
    from pipeline.reporting import build_report
    from pipeline.reporting import figures as figures_module
    from pipeline.reporting import tables as tables_module

    row = Row("killed report")
    root = ctx.root("report")
    ctx.copy_clean(root)
    cfg = ctx.cfg(root)
    build_report(resolve_cell(cfg))
    clean = ctx.clean_tables()
    if (problem := compare_tables(read_tables(root / "results"), clean)) is not None:
        row.record("a second clean report (control)", WRONG, problem)
    other = ctx.cfg(root, "evaluation.max_rejection=0.4")  # another report: other tables
    kills: list[tuple[str, object]] = [
        ("killed at its 4th table", (tables_module, "write_table", 3)),
        ("killed at its 1st table", (tables_module, "write_table", 0)),
        ("killed at its 2nd figure", (figures_module, "_save", 1)),
        ("SIGKILL 0.5 s after it started rewriting", 0.5),
        ("SIGKILL 2 s after it started rewriting", 2.0),
    ]
    for label, how in kills[:1] if ctx.quick else kills:
        note = ""
        if isinstance(how, tuple):
            try:
                with killed_at_call(*how):
                    build_report(resolve_cell(other))
            except KeyboardInterrupt:
                pass
            else:
                note = " (the kill never came)"
        else:
            proc = ctx.spawn(
                root,
                ctx.overrides(root, "stage=report", "evaluation.max_rejection=0.4"),
                tag=f"report-{how}",
            )
            manifest = root / "results" / ".report.manifest.json"
            deadline = time.monotonic() + 300
            while manifest.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(how)
            note = wait_then_kill(proc, root, 0)

        def rerun():
            result = build_report(resolve_cell(cfg))
            problem = compare_tables(read_tables(root / "results"), clean)
            if problem is not None:
                said = "up to date" if result["skipped"] else "redone"
                return WRONG, f"the rerun said {said}, exit 0, but {problem}"
            return IDENTICAL, ""

        row.record(label + note, *outcome_of(rerun))
    return row


# ----------------------------------------------------------------------------------------------
# 10. two runs of one cell at once


def attack_concurrent(ctx: Chaos) -> Row:
    """Two command-line runs of one cell started together: one generates, the other waits for
    the cell's lock and finds it current; both exit 0 and the cell is the clean one."""
    row = Row("two runs of one cell at once")
    stage = "generate" if ctx.quick else "all"  # quick: the part that takes the lock longest
    root = ctx.root("concurrent")
    args = ctx.overrides(root, f"stage={stage}")
    procs = [ctx.spawn(root, args, tag=f"run{i}") for i in (1, 2)]
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=600))
        except subprocess.TimeoutExpired:
            kill(proc)
            codes.append(-1)
    logs = [ctx.logs(root, f"run{i}") for i in (1, 2)]

    def check():
        if any("Traceback" in text for text in logs) or codes != [0, 0]:
            refusals = [cli_refused(c, t) for c, t in zip(codes, logs)]
            if all(o != WRONG for o, _ in refusals) and 2 in codes:
                return REFUSED, "; ".join(d for _, d in refusals)
            return WRONG, f"exit statuses {codes}: {[t[-300:] for t in logs]!r}"
        generated = sum("[generate] done" in text for text in logs)
        current = sum("[generate] up to date" in text for text in logs)
        if (generated, current) != (1, 1):
            return WRONG, f"{generated} runs generated, {current} found the cell current"
        if stage != "all":
            run_cell(ctx.cfg(root))
        return ctx.verdict(ctx.cell(root))

    row.record(f"two stage={stage} runs", *outcome_of(check))
    return row


# ----------------------------------------------------------------------------------------------
# 11-18. round 2 (issue 38): foreign producers, cache records, keys, full disks, endpoint
# faults, SIGTERM, invisible characters, the packaged model with W&B offline


def attack_scorer_folder(ctx: Chaos) -> Row:
    """A scorer work folder (pipeline.score's artifacts) copied into the pipeline cell: every
    later stage and the report must refuse it; the reverse (the clean cell copied into the
    scorer's work folder) must give the clean scoring."""
    from pipeline.reporting import build_report
    from pipeline.scorer.run import score

    row = Row("scorer folder in a pipeline cell")
    root = ctx.root("scorer-folder")
    cfg = ctx.cfg(root)
    rows = [
        {
            "id": f"q{i}",
            "question": f"Capital {i}?",
            "responses": ["Paris", "Paris", "Rome"],
            "reference": "Paris",
        }
        for i in range(3)
    ]
    overrides = [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clean = score(rows, task=cfg.task.name, work_dir=root / "scored", overrides=overrides)
    (work,) = [p for p in (root / "scored").iterdir() if p.is_dir()]
    cell = ctx.cell(root)
    shutil.copytree(work, cell)
    store = ArtifactStore(cell)
    for stage in CELL_STAGES[1:]:

        def attack(stage=stage):
            run_stage(stage, resolve_cell(cfg), store)
            return WRONG, f"stage={stage} ran on the scorer's artifacts, exit 0"

        row.record(f"stage={stage} on the scorer's folder", *outcome_of(attack))

    def report():
        build_report(resolve_cell(cfg))
        return WRONG, "the report read the scorer's quality as the model's, exit 0"

    row.record("the report over it", *outcome_of(report))

    def reverse():
        shutil.rmtree(work)
        shutil.copytree(ctx.clean_cell, work)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = score(rows, task=cfg.task.name, work_dir=root / "scored", overrides=overrides)
        try:
            pd.testing.assert_frame_equal(again, clean)
        except AssertionError as exc:
            return WRONG, f"the scorer read the pipeline's artifacts: {one_line(exc)[:200]}"
        return IDENTICAL, ""

    row.record("the pipeline cell in the scorer's work folder", *outcome_of(reverse))
    return row


def attack_cache_records(ctx: Chaos) -> Row:
    """Replies a cache must not keep (blank text, NaN / inf / positive log-probs: failed calls,
    retried), and records edited on disk (valid JSON, another answer): never served."""
    from openai_stand_in import FakeOpenAIServer, scripted

    from pipeline.clients.llm_client import LLMClient

    row = Row("cache records")
    job = ([{"role": "user", "content": "Capital of France?"}], {"n": 1, "logprobs": True})
    with FakeOpenAIServer() as server:

        def client(cache: Path) -> LLMClient:
            return LLMClient(
                model="rule-server",
                base_url=server.base_url,
                cache_dir=cache,
                backoff_base=0.01,
                max_retries=2,
            )

        bad_replies = [
            ("blank text", ("", [-0.5])),
            ("whitespace text", (" \n", [-0.5])),
            ("NaN log-prob", ("Paris", [float("nan")])),
            ("+inf log-prob", ("Paris", [float("inf")])),
            ("positive log-prob", ("Paris", [0.7])),
        ]
        for label, bad in bad_replies:
            cache = ctx.root("records") / "cache"

            def bad_then_good(cache=cache, bad=bad):
                server.state.sampler = scripted(bad, ("Paris", [-0.25]))
                got = client(cache).choices_many([job])[0][0]
                if (got["text"], got["logprobs"]) != ("Paris", [-0.25]):
                    return WRONG, f"the bad reply was taken: {got}"
                server.state.sampler, before = scripted(("Lyon", [-0.5])), server.state.requests
                again = client(cache).choices_many([job])[0][0]
                if again["text"] != "Paris" or server.state.requests != before:
                    return WRONG, "the good answer was not the one cached"
                return IDENTICAL, ""

            row.record(f"a {label} reply, then the answer", *outcome_of(bad_then_good))
        for edit in ("answer changed", "digest removed"):
            cache = ctx.root("records") / "cache"

            def edited(cache=cache, edit=edit):
                server.state.sampler = scripted(("Paris", [-0.25]))
                client(cache).choices_many([job])
                (path,) = cache.rglob("*.json")
                record = json.loads(path.read_text())
                if edit == "answer changed":
                    text = path.read_text().replace('"Paris"', '"Berlin"')
                else:
                    record.pop("digest", None)
                    text = json.dumps(record)
                path.write_text(text)
                server.state.sampler = scripted(("Madrid", [-0.5]))
                got = client(cache).choices_many([job])[0][0]["text"]
                if got != "Madrid":  # asked again: the edited record was no answer
                    return WRONG, f"the edited record was served: {got}"
                return IDENTICAL, ""

            row.record(f"a cached record with its {edit}", *outcome_of(edited))
    return row


SECRET = "sk-chaos-0123456789abcdefSECRET"


def files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def attack_secrets(ctx: Chaos) -> Row:
    """A key inside a URL setting (user:key@, ?api_key=) on the command line or in a config
    file: refused in one line, exit 2, and no file the run wrote holds the key."""
    row = Row("keys in URL settings")
    tries = [
        ("backend.base_url with user:key@", [f"backend.base_url=http://u:{SECRET}@h:9/v1"]),
        (
            "task.extractor.base_url with ?api_key=",
            [f"task.extractor.base_url=https://h/v1?api_key={SECRET}"],
        ),
        ("+backend.base_url with key@", [f"+backend.base_url=http://{SECRET}@h:9/v1"]),
        # round 3 (issue 53): a fragment, path parameters, other names, a key as a name
        ("backend.base_url with #api_key=", [f"backend.base_url=http://h:9/v1#api_key={SECRET}"]),
        ("backend.base_url with ;api_key=", [f"backend.base_url=http://h:9/v1;api_key={SECRET}"]),
        (
            "backend.base_url with ?x-api-key=",
            [f"backend.base_url=http://h:9/v1?x-api-key={SECRET}"],
        ),
        ("a key given as backend.api_key_env", [f"backend.api_key_env={SECRET}"]),
    ]
    if not ctx.quick:
        tries += [
            (
                f"task.extractor.base_url with ?{name}=",
                [f"task.extractor.base_url=https://h/v1?api-version=1&{name}={SECRET}"],
            )
            for name in (
                "client_secret",
                "hf_token",
                "private_token",
                "X-Amz-Signature",
                "subscription-key",
                "auth_token",
                "accessToken",
                "clientSecret",
                "apitoken",
                "passphrase",
                "jwt",
            )
        ]
        tries += [
            (
                "a scheme-less base_url with ?api_key=",
                [f"backend.base_url=h:9/v1?api_key={SECRET}"],
            ),
            (
                "an AWS key id as backend.api_key_env",
                ["backend.api_key_env=AKIA" + "ABCDEFGHIJKLMNOP"],
            ),
        ]
        tries.append(
            (
                "a sweep over base URLs",
                ["-m", f"backend.base_url=http://a:9/v1,http://u:{SECRET}@b:9/v1"],
            )
        )
    mine = ctx.work / "leaky-configs" / "experiment"
    mine.mkdir(parents=True, exist_ok=True)
    (mine / "leaky.yaml").write_text(
        f"# @package _global_\nexperiment: leaky\nbackend:\n  base_url: http://u:{SECRET}@h:9/v1\n"
    )
    tries.append(
        (
            "a config file's base_url",
            [f"hydra.searchpath=[file://{mine.parent}]", "experiment=leaky"],
        )
    )
    (mine / "leaky_env.yaml").write_text(
        f"# @package _global_\nexperiment: leaky_env\nbackend:\n  api_key_env: {SECRET}\n"
    )
    tries.append(
        (
            "a config file's api_key_env holding a key",
            [f"hydra.searchpath=[file://{mine.parent}]", "experiment=leaky_env"],
        )
    )
    for label, extra in tries:
        root = ctx.root("secrets")
        rc, logs = ctx.cli(root, [*ctx.overrides(root, "stage=plan"), *extra])
        outcome, detail = cli_refused(rc, logs)
        if outcome == REFUSED and (leaked := files_holding(root, SECRET)):
            outcome, detail = WRONG, f"refused, but the key is in {leaked[:3]}"
        row.record(label, outcome, detail)
    return row


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of `size` at `folder` (root only: CI and `make chaos` run as root)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cannot mount a tmpfs at {folder} (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def attack_disk_full(ctx: Chaos) -> Row:
    """The cell's disk (a real tmpfs) full with a few KiB left, at several sizes so that
    different writes fail: the command line stops in one line, exit 2; with the space back,
    the rerun gives the clean cell."""
    import shutil as sh

    row = Row("disk full")
    leaves = [0, 6_000, 40_000] + ([] if ctx.quick else [2_000, 15_000, 80_000, 160_000])
    for leave in leaves:
        root = ctx.root("diskfull")

        def attack(root=root, leave=leave):
            with small_disk(root / "out"):
                filler = root / "out" / "filler"
                with open(filler, "wb") as fh:
                    fh.write(b"\0" * max(0, sh.disk_usage(root / "out").free - leave))
                rc, logs = ctx.cli(root, ctx.overrides(root, "stage=all"))
                filler.unlink()
                if rc == 0:  # it fitted: then it must be the clean cell
                    return ctx.verdict(ctx.cell(root))
                outcome, detail = cli_refused(rc, logs)
                if outcome != REFUSED or "no space left" not in logs:
                    return WRONG, detail or f"exit {rc} without naming the full disk"
                run_cell(ctx.cfg(root))
                return ctx.verdict(ctx.cell(root))

        row.record(f"{leave} bytes left", *outcome_of(attack))
    return row


def attack_endpoint_faults(ctx: Chaos) -> Row:
    """A server that hangs mid-body, one that sends an oversized body, one that keeps failing:
    each a refusal naming the setting or the server's own error, within the bounds set."""
    from openai_stand_in import FaultyServer

    from pipeline.clients.llm_client import LLMCallError, LLMClient

    row = Row("endpoint faults")
    tries = [
        ("a body that hangs", ("hang",), "timeout", 6.0),
        ("an oversized body (streamed)", ("stream", 4 * 2**20), "max_response_bytes", 10.0),
        (
            "500 with the engine's error",
            ("status", 500, "engine dead: CUDA error"),
            "engine dead",
            10.0,
        ),
        ("503 forever", ("status", 503, "overloaded", {"Retry-After": "0"}), "overloaded", 10.0),
    ]
    with FaultyServer() as server:
        for label, fault, named, bound in tries:
            cache = ctx.root("endpoint") / "cache"

            def attack(cache=cache, fault=fault, named=named, bound=bound):
                server.fault = fault
                client = LLMClient(
                    model="rule-server",
                    base_url=server.base_url,
                    cache_dir=cache,
                    backoff_base=0.01,
                    max_retries=1,
                    timeout=1.0,
                    deadline=4.0,
                    max_response_bytes=2**20,
                )
                started = time.monotonic()
                try:
                    client.choices_many([([{"role": "user", "content": "q"}], {"n": 1})])
                except LLMCallError as exc:
                    took, said = time.monotonic() - started, one_line(exc)
                    if named not in said or took > bound:
                        return WRONG, f"after {took:.1f} s: {said[:200]}"
                    if list(cache.rglob("*.json")):
                        return WRONG, "the fault's reply was cached"
                    return REFUSED, said[:160]
                finally:
                    server.fault = None
                return WRONG, "the fault's reply was taken"

            row.record(label, *outcome_of(attack, refusals=()))
    return row


def attack_sigterm(ctx: Chaos) -> Row:
    """SIGTERM (SLURM's warning before a kill) or SIGINT sent to `python -m pipeline stage=all`
    once a shard is written, or after a delay: one log line, exit 75 (requeue), and the rerun
    gives the clean cell."""
    from pipeline.runtime.stopping import REQUEUE_EXIT

    row = Row("SIGTERM / SIGINT")
    tries = [
        ("SIGTERM when the first shard is written", signal.SIGTERM, None),
        ("SIGINT when the first shard is written", signal.SIGINT, None),
    ]
    if not ctx.quick:
        tries += [(f"SIGTERM after {d} s", signal.SIGTERM, d) for d in (4.0, 8.0, 12.0)]
    for label, sig, delay in tries:
        root = ctx.root("sigterm")

        def attack(root=root, sig=sig, delay=delay):
            proc = ctx.spawn(root, ctx.overrides(root, "stage=all"))
            cell, deadline = ctx.cell(root), time.monotonic() + (delay or 600)
            while proc.poll() is None and time.monotonic() < deadline:
                if delay is None and list(cell.glob("samples.shards/*/shard-00000.json")):
                    break
                time.sleep(0.02)
            if proc.poll() is not None:  # faster than the delay: then it must be the clean cell
                if proc.returncode == 0 and delay is not None:
                    outcome, detail = ctx.verdict(cell)
                    return outcome, detail or "the run ended before the signal"
                return WRONG, f"the run ended (exit {proc.returncode}) before the signal"
            proc.send_signal(sig)
            rc, logs = proc.wait(timeout=120), ctx.logs(root)
            if "Traceback" in logs:
                return WRONG, f"a traceback: {logs[logs.find('Traceback') :][:200]!r}"
            lines = [line for line in logs.splitlines() if "stopped cleanly" in line]
            if (
                rc == -signal.SIGTERM
                and not lines
                and "[evaluate] done" in logs
                and ctx.verdict(cell)[0] == IDENTICAL
            ):
                # the signal came as Python exited after the work (its own finalization puts
                # the default handlers back): every artifact is there, a rerun does nothing
                return IDENTICAL, "the signal came as the process exited, after the work"
            if rc != REQUEUE_EXIT or len(lines) != 1:
                return WRONG, f"exit {rc}, {len(lines)} 'stopped cleanly' line(s)"
            run_cell(ctx.cfg(root))
            return ctx.verdict(cell)

        row.record(label, *outcome_of(attack))
    return row


def attack_invisible(ctx: Chaos) -> Row:
    """Answers that differ only by characters a reader cannot see (zero-width, soft hyphen,
    bidi controls, BOM, full-width or compatibility forms): scored as the plain answers; reals
    far past float range: a finite risk (l1) or the prompt refused with NaN (l2), never inf."""
    import math

    from pipeline.scorer.run import score

    row = Row("invisible characters")
    root = ctx.root("invisible")
    overrides = [f"cache_dir={root / 'cache'}"]
    variants = {
        "zero-width space": "Paris\u200b",
        "soft hyphen": "Pa\u00adris",
        "bidi mark": "\u200eParis",
        "bidi override": "\u202eParis\u202c",
        "byte order mark": "\ufeffParis",
        "word joiner": "Par\u2060is",
        "full-width": "\uff30\uff41\uff52\uff49\uff53",
    }
    if ctx.quick:
        variants = dict(list(variants.items())[:3])

    def risks(responses: list[list[str]], task: str = "classes", extra=()) -> list[float]:
        rows = [
            {"id": f"q{i}", "question": "Capital of France?", "responses": r}
            for i, r in enumerate(responses)
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(score(rows, task=task, overrides=[*overrides, *extra])["bayes_risk"])

    plain = risks([["Paris", "Paris", "Paris"]])[0]
    for label, text in variants.items():

        def attack(text=text):
            got = risks([[text, "Paris", "Paris"]])[0]
            return (
                (IDENTICAL, "")
                if got == plain
                else (WRONG, f"risk {got} where the plain answers give {plain}")
            )

        row.record(label, *outcome_of(attack))
    for loss in ("l1", "l2"):

        def huge(loss=loss):
            got = risks(
                [["1e308", "1e308", "-1e308"], ["1", "3", "2"]],
                "reals",
                [f"task.space_options.loss={loss}"],
            )
            if not math.isfinite(got[1]):
                return WRONG, f"the ordinary prompt lost its risk: {got}"
            if math.isinf(got[0]):
                return WRONG, f"risk {got[0]} written as a number"
            return (
                (IDENTICAL, "")
                if math.isfinite(got[0])
                else (REFUSED, "the prompt's risk exceeds the largest float: NaN, with a warning")
            )

        row.record(f"reals spanning +-1e308, {loss}", *outcome_of(huge))
    return row


def attack_smollm2_wandb(ctx: Chaos) -> Row:
    """One cell of the packaged SmolLM2-135M with W&B offline and a key in the environment:
    exit 0, an offline W&B run written, the key in no file; the rerun changes nothing."""
    row = Row("SmolLM2 cell, W&B offline")
    root = ctx.root("smollm2")
    overrides = [
        "dataset=triviaqa_bundled",
        "dataset.limit=3",
        "dataset.max_new_tokens=12",
        "generation.n_samples=3",
        "generation.strategies=[greedy]",
        "generation.ptrue=false",
        "backend.num_threads=1",
        "stage=all",
        "wandb.enabled=true",
        f"wandb.dir={root}",
        f"output_root={root / 'out'}",
        f"results_dir={root / 'results'}",
        f"cache_dir={root / 'cache'}",
    ]
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "OPENAI_API_KEY": SECRET,
        "WANDB_API_KEY": SECRET[:8] + "0" * 32,
    }
    cell = root / "out" / "default" / "smollm2-135m" / "triviaqa_bundled"

    def run(tag: str) -> tuple[int, str]:
        out = root / f"{tag}.log"
        with open(out, "w") as fh:
            rc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pipeline",
                    *overrides,
                    f"hydra.run.dir={root / 'hydra' / tag}",
                ],
                cwd=REPO,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=1200,
                check=False,
            ).returncode
        return rc, out.read_text(errors="replace")

    def first():
        rc, logs = run("first")
        if rc != 0 or "Traceback" in logs:
            return WRONG, f"exit {rc}: {logs[-300:]!r}"
        runs = list(root.rglob("offline-run-*"))
        if not runs or not list(runs[0].rglob("*.wandb")):
            return WRONG, "no offline W&B run was written"
        if leaked := files_holding(root, SECRET) + files_holding(root, SECRET[:8] + "0" * 32):
            return WRONG, f"the key is in {leaked[:3]}"
        return IDENTICAL, ""

    row.record("a clean run (exit 0, offline W&B run, no key on disk)", *outcome_of(first))

    def rerun():
        before = {p.name: p.read_bytes() for p in cell.glob("*.parquet")}
        rc, _ = run("rerun")
        after = {p.name: p.read_bytes() for p in cell.glob("*.parquet")}
        if rc != 0 or before != after or not before:
            return WRONG, f"exit {rc}; artifacts changed: {sorted(set(before) ^ set(after))}"
        return IDENTICAL, ""

    row.record("the rerun (every stage up to date)", *outcome_of(rerun))
    return row


# ----------------------------------------------------------------------------------------------


def attack_serve(ctx: Chaos) -> Row:
    """`taskaware serve` (a subprocess) in front of the stand-in, attacked over loopback (issue
    52): invented model names (threads stay bounded), an upstream that echoes its key (never
    passed on), NaN / infinite / out-of-range numbers, a body nested 100,000 deep, a 50 MB body
    and a 20 MB model name (4xx naming the problem, memory bounded, the name's echo bounded), a
    key inside --upstream (refused, not echoed); then every request access-logged and no
    traceback in the server's stderr."""
    import urllib.error
    import urllib.request

    import psutil
    from openai_stand_in import FakeOpenAIServer

    row = Row("serve attacks")
    key = "sk-upstream-chaos-7f3e91c2d4"
    folder = ctx.root("serve")
    log_path, err_path = folder / "access.jsonl", folder / "stderr.txt"

    def sampler(request: dict) -> list[dict]:
        return [{"text": "Paris", "tokens": [("Paris", -0.1)]}] * request.get("n", 1)

    with FakeOpenAIServer() as upstream, open(err_path, "w") as err:
        upstream.state.sampler = sampler
        upstream.state.served_models = None  # any model name is answered
        port = _free_port()
        env = {**os.environ, "OPENAI_API_KEY": key, "TASKAWARE_API_KEY": ""}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline.serve",
                "--upstream",
                upstream.base_url,
                "--port",
                str(port),
                "--n",
                "3",
                "--access-log",
                str(log_path),
                "--upstream-retries",
                "0",
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=env,
            stdout=err,
            stderr=err,
        )
        ctx.procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health/live", timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        server = psutil.Process(proc.pid)
        sent = 0

        def post(body: bytes) -> tuple[int, str]:
            nonlocal sent
            sent += 1
            request = urllib.request.Request(
                url + "/v1/chat/completions",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        def chat(**fields) -> bytes:
            return json.dumps(
                {
                    "model": "m:classes",
                    "messages": [{"role": "user", "content": "capital of France?"}],
                    **fields,
                }
            ).encode()

        def expect(label: str, status: int, body: bytes, named: str) -> None:
            def attack():
                got, text = post(body)
                if got != status or named not in text or key in text:
                    return WRONG, f"HTTP {got}: {text[:160]}"
                return REFUSED, f"HTTP {got}"

            row.record(label, *outcome_of(attack, refusals=()))

        threads_before = server.num_threads()
        names = 40 if ctx.quick else 300

        def invented_names():
            for i in range(names):
                got, text = post(
                    json.dumps(
                        {
                            "model": f"model-{i}:classes",
                            "samples": 1,
                            "messages": [{"role": "user", "content": "q"}],
                        }
                    ).encode()
                )
                if got != 200:
                    return WRONG, f"HTTP {got}: {text[:120]}"
            grown = server.num_threads() - threads_before
            return (
                (IDENTICAL, f"+{grown} threads")
                if grown <= 18
                else (WRONG, f"+{grown} threads after {names} model names")
            )

        row.record(f"{names} invented model names", *outcome_of(invented_names, refusals=()))

        def echoed_key():
            upstream.state.faults = [
                ("message", 401, f"bad key {key} (Authorization: Bearer {key})")
            ]
            got, text = post(chat())
            upstream.state.faults = []
            if key in text or got != 401:
                return WRONG, f"HTTP {got}: {text[:160]}"
            return REFUSED, "401, key redacted"

        row.record("an upstream that echoes its key", *outcome_of(echoed_key, refusals=()))
        for label, fields, named in (
            ("NaN temperature", {"temperature": float("nan")}, "temperature"),
            ("infinite top_p", {"top_p": float("inf")}, "top_p"),
            ("top_p=0", {"top_p": 0}, "top_p"),
            ("samples=1e9", {"samples": 10**9}, "samples"),
            ("tools", {"tools": [{"type": "function"}]}, "tools"),
        ):
            expect(label, 400, chat(**fields), named)
        expect("a body nested 100,000 deep", 400, b"[" * 100_000 + b"]" * 100_000, "nests")
        memory_before = server.memory_info().rss
        expect("a 50 MB body", 413, b'{"model": "' + b"m" * (50 * 2**20) + b'"}', "max-body-bytes")

        def memory_bounded():
            grown = (server.memory_info().rss - memory_before) / 2**20
            return (
                (IDENTICAL, f"+{grown:.0f} MiB")
                if grown < 64
                else (WRONG, f"+{grown:.0f} MiB after a 50 MB body")
            )

        row.record("memory after the 50 MB body", *outcome_of(memory_bounded, refusals=()))
        expect(
            "a 20 MB model name",
            413,
            b'{"model": "' + b"m" * (20 * 2**20) + b'"}',
            "max-body-bytes",
        )
        expect(
            "a 1 MB model name",
            404,
            json.dumps(
                {"model": "m" * 2**20 + ":poems", "messages": [{"role": "user", "content": "q"}]}
            ).encode(),
            "characters)",
        )
        proc.terminate()
        proc.wait(timeout=60)

    def key_in_url():
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline.serve",
                "--upstream",
                f"http://127.0.0.1:9/v1?api_key={key}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        said = done.stdout + done.stderr
        if done.returncode != 2 or key in said or "Traceback" in said:
            return WRONG, f"exit {done.returncode}: {said[:160]}"
        return REFUSED, "exit 2, not echoed"

    row.record("a key inside --upstream", *outcome_of(key_in_url, refusals=()))

    def logged_and_quiet():
        logged = [json.loads(line) for line in log_path.read_text().splitlines()]
        chats = [e for e in logged if e["path"] == "/v1/chat/completions"]
        stderr = err_path.read_text()
        if len(chats) != sent:
            return WRONG, f"{len(chats)} of {sent} requests access-logged"
        if "Traceback" in stderr or key in stderr + log_path.read_text():
            return WRONG, f"server stderr: {stderr[-300:]}"
        return IDENTICAL, f"{sent} requests logged, 0 tracebacks"

    row.record("every request logged, no traceback", *outcome_of(logged_and_quiet, refusals=()))
    return row


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------
# 20-25. round 3 (issue 53): the scorer at scale, signals in finalisers, plugins, --out, disks


def _rows_file(
    path: Path, n: int, label: str = "Paris", pad: int = 0, reference: str = "Paris"
) -> Path:
    """n prompts of three answers with a reference; `pad` characters of ballast per row (a
    reader holds 1 MiB at a time: a change must land beyond it)."""
    rows = [
        {
            "id": f"q{i}",
            "question": f"Capital {i}?",
            "reference": reference,
            "responses": [label, label, "Lyon"],
            **({"note": "x" * pad} if pad else {}),
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _scorer_proc(
    args: list, cwd: Path = REPO, env: dict | None = None, log: Path | None = None
) -> subprocess.Popen:
    out = open(log, "w") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "pipeline.score", *map(str, args)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        if log is not None:
            out.close()


def _same_rows(a: Path, b: Path) -> str | None:
    """None when the two outputs hold the same rows, else what differs."""
    read = pd.read_parquet if a.suffix == ".parquet" else (lambda p: pd.read_json(p, lines=True))
    try:
        pd.testing.assert_frame_equal(read(a), read(b))
    except AssertionError as exc:
        return " ".join(str(exc).split())[:200]
    return None


def attack_changed_input(ctx: Chaos) -> Row:
    """The input file rewritten while the scorer reads it in parts (a row's reference, a row
    appended, the file cut), then restored byte for byte with its modification time, or left
    changed: refused in one line, and the rerun in the same work folder scores what the file
    says (no stale part)."""
    from pipeline.scorer import readers
    from pipeline.scorer.readers import ScoreInputError
    from pipeline.scorer.run import score

    row = Row("input changed while read")

    def edit_reference(rows):
        rows[5]["reference"] = "Lyon"

    def append(rows):
        rows.append({**rows[0], "id": "extra"})

    def cut(rows):
        del rows[3:]

    tries = [
        ("a reference changed after part 1, restored", edit_reference, 1, True),
        ("a reference changed after part 1, left changed", edit_reference, 1, False),
        ("a row appended after part 2, restored", append, 2, True),
    ]
    if not ctx.quick:
        tries += [
            ("the file cut after part 1, restored", cut, 1, True),
            ("a reference changed after part 2, restored", edit_reference, 2, True),
        ]
    real = readers._jsonl_chunks
    for label, edit, after, restore in tries:
        root = ctx.root("changed-input")
        path = _rows_file(root / "in.jsonl", 6, pad=400_000)
        original, stat = path.read_bytes(), os.stat(path)
        rows = [json.loads(line) for line in original.splitlines()]
        edit(rows)
        changed = "".join(json.dumps(r) + "\n" for r in rows).encode()

        def chunks(
            *args,
            path=path,
            changed=changed,
            original=original,
            stat=stat,
            after=after,
            restore=restore,
            **kwargs,
        ):
            gen = real(*args, **kwargs)
            for _ in range(after):
                yield next(gen)
            path.write_bytes(changed)
            yield from gen
            if restore:
                path.write_bytes(original)
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

        def attack(root=root, path=path, chunks=chunks):
            overrides = [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20"]
            kwargs = {"task": "classes", "part_prompts": 2, "overrides": overrides}
            readers._jsonl_chunks = chunks
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    score(path, work_dir=root / "work", **kwargs)
                outcome, detail = WRONG, "the read was taken"
            except ScoreInputError as exc:
                if "changed while it was read" not in str(exc):
                    return WRONG, f"refused for another reason: {one_line(exc)}"
                outcome, detail = REFUSED, one_line(exc)[:160]
            finally:
                readers._jsonl_chunks = real
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = score(path, work_dir=root / "work", **kwargs)
                fresh = score(path, work_dir=root / "fresh", **kwargs)
            try:
                pd.testing.assert_frame_equal(again, fresh)
            except AssertionError as exc:
                return WRONG, f"the rerun kept a stale part: {one_line(exc)[:200]}"
            if outcome == WRONG:  # taken: right only if what was read is the file
                return IDENTICAL, "the change fell inside what was already read"
            return outcome, detail

        row.record(label, *outcome_of(attack))
    for size in (100,) if ctx.quick else (100, 2500):
        row.record(
            f"a parquet of {size} rows changed while pyarrow reads it, restored",
            *outcome_of(lambda size=size: _parquet_changed_while_read(ctx, size)),
        )
    return row


def _parquet_changed_while_read(ctx: Chaos, size: int) -> tuple[str, str]:
    """A parquet input rewritten as the library opens it and restored (mtime too) after: the
    run must score one consistent snapshot and the rerun what the file says."""
    from pipeline.scorer.run import score

    root = ctx.root("changed-parquet")
    rows = [json.loads(x) for x in _rows_file(root / "rows.jsonl", size).read_text().splitlines()]
    path = root / "in.parquet"
    pd.DataFrame(rows).to_parquet(path)
    changed = [dict(r) for r in rows]
    changed[-1]["reference"] = "Lyon"
    original, stat = path.read_bytes(), os.stat(path)
    real = pd.read_parquet

    def read_while_changed(source, *args, **kwargs):
        pd.DataFrame(changed).to_parquet(path)
        try:
            return real(source, *args, **kwargs)
        finally:
            path.write_bytes(original)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    kwargs = {
        "task": "classes",
        "overrides": [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20"],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.read_parquet = read_while_changed
        try:
            attacked = score(path, work_dir=root / "work", **kwargs)
        finally:
            pd.read_parquet = real
        again = score(path, work_dir=root / "work", **kwargs)
        fresh = score(path, work_dir=root / "fresh", **kwargs)
    cols = ["prompt_id", "bayes_text", "quality_bayes_exact_match_error"]
    for name, frame in (("the attacked run", attacked), ("the rerun", again)):
        try:
            pd.testing.assert_frame_equal(frame[cols], fresh[cols])
        except AssertionError as exc:
            return WRONG, f"{name} scored other rows than the file's: {one_line(exc)[:160]}"
    return IDENTICAL, ""


FINALISER_PLUGIN = '''"""chaos: a finaliser that receives SIGTERM (issue 53)."""
import os
import signal
import time

AT = int(os.environ.get("CHAOS_FINALISER_AT", "0"))


class Bomb:
    freed = 0

    def __init__(self):
        self.cycle = self  # freed by the cyclic collector, at a moment of its choosing

    def __del__(self):
        Bomb.freed += 1
        if Bomb.freed == AT:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here, inside the finaliser
        elif Bomb.freed < AT:
            Bomb()  # the next one: finalisers run all through the run


if AT:
    Bomb()
'''


def attack_finaliser_signal(ctx: Chaos) -> Row:
    """SIGTERM delivered inside a finaliser (`__del__` of an object the garbage collector
    frees), at the n-th of a chain of such finalisers running all through `stage=all`: Python
    swallows the exception there; the run must still stop at once with exit 75 and one line
    (never go on to exit 0), with no traceback, and the rerun gives the clean cell."""
    from pipeline.runtime.stopping import REQUEUE_EXIT

    row = Row("SIGTERM inside a finaliser")
    plugins = ctx.work / "finaliser-plugin"
    plugins.mkdir(exist_ok=True)
    (plugins / "chaos_finaliser.py").write_text(FINALISER_PLUGIN)
    points = [1, 400] if ctx.quick else [1, 30, 150, 400, 1000, 3000, 10000, 30000]
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(plugins), saved.get("PYTHONPATH")])
    )
    try:
        for at in points:
            root = ctx.root("finaliser")

            def attack(root=root, at=at):
                os.environ["CHAOS_FINALISER_AT"] = str(at)
                args = ctx.overrides(root, "stage=all", "plugins=[chaos_finaliser]")
                rc, logs = ctx.cli(root, args)
                if "Traceback" in logs:
                    return WRONG, f"a traceback: {logs[logs.find('Traceback') :][:200]!r}"
                stopped = [line for line in logs.splitlines() if "stopped cleanly" in line]
                if rc == 0 and not stopped:
                    detail = "ran to the end before the n-th finaliser"
                elif rc != REQUEUE_EXIT or len(stopped) != 1:
                    return WRONG, f"exit {rc}, {len(stopped)} 'stopped cleanly' line(s)"
                else:
                    detail = stopped[0].split("]")[-1].strip()[:120]
                os.environ["CHAOS_FINALISER_AT"] = "0"
                rc, logs = ctx.cli(root, args, tag="rerun")
                if rc != 0:
                    return WRONG, f"the rerun: exit {rc}"
                outcome, problem = ctx.verdict(ctx.cell(root))
                return (
                    (outcome, problem)
                    if outcome == WRONG
                    else (
                        (IDENTICAL if rc == 0 and "ran to the end" in detail else REFUSED),
                        detail,
                    )
                )

            row.record(f"signal at finaliser {at}", *outcome_of(attack))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return row


PLUGIN_METRIC = """from pipeline.tasks import METRICS, Metric

from .helper import SCALE


def chaos_len(action, reference, settings):
    return SCALE * len(str(action))


METRICS.add("chaos_len", Metric("Chaos length", higher_is_better=False, fn=chaos_len),
            replace=True)
"""


def attack_edited_plugin(ctx: Chaos) -> Row:
    """A plugin metric (`chaosplug/metric.py`, importing `chaosplug/helper.py`) used by
    `taskaware-score --plugin chaosplug` run from the plugin's folder: after an edit of either
    file, the rerun in the same work folder gives what a fresh work folder gives with the
    edited code (never the old numbers as "up to date, skipped")."""
    row = Row("edited plugin")
    root = ctx.root("plugin")
    package = root / "chaosplug"
    package.mkdir()
    (package / "__init__.py").write_text("from . import metric  # noqa: F401\n")
    (package / "helper.py").write_text("SCALE = 1.0\n")
    (package / "metric.py").write_text(PLUGIN_METRIC)
    data = _rows_file(root / "in.jsonl", 4)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(out: Path, work: Path) -> tuple[int, str]:
        log = out.with_suffix(".log")
        proc = _scorer_proc(
            [
                data,
                "--task",
                "classes",
                "--plugin",
                "chaosplug",
                "--out",
                out,
                "--work-dir",
                work,
                "task.metrics=[exact_match_error,chaos_len]",
                f"cache_dir={root / 'cache'}",
                "evaluation.n_bootstrap=20",
            ],
            cwd=root,
            env=env,
            log=log,
        )
        return proc.wait(timeout=600), log.read_text(errors="replace")

    rc, logs = run(root / "first.parquet", root / "work")
    if rc != 0:
        row.record("the plugin from the working directory", WRONG, f"exit {rc}: {logs[-300:]}")
        return row
    edits = [
        ("metric.py's formula", "metric.py", "SCALE * len", "SCALE * 2 * len"),
        ("helper.py, which metric.py imports", "helper.py", "SCALE = 1.0", "SCALE = 10.0"),
    ]
    before = root / "first.parquet"
    for n, (label, file, old, new) in enumerate(edits):

        def attack(n=n, file=file, old=old, new=new, before=before):
            (package / file).write_text((package / file).read_text().replace(old, new))
            out, fresh = root / f"edit{n}.parquet", root / f"fresh{n}.parquet"
            for target, work in ((out, root / "work"), (fresh, root / f"fresh-work{n}")):
                rc, logs = run(target, work)
                if rc != 0:
                    return WRONG, f"exit {rc}: {logs[-300:]}"
            if (problem := _same_rows(out, fresh)) is not None:
                return WRONG, f"the rerun kept the old code's numbers: {problem}"
            if _same_rows(out, before) is None:
                return WRONG, "the edit changed nothing: the attack did not reach the metric"
            return IDENTICAL, ""

        row.record(f"an edit of {label}", *outcome_of(attack))
        before = root / f"edit{n}.parquet"
    return row


def attack_scorer_out_kill(ctx: Chaos) -> Row:
    """`taskaware-score --out res.jsonl` SIGKILLed at points of a run over 3,000 prompts (as
    its output is being written, and at fractions of its run time) while a previous run's
    output is there: res.jsonl is always whole (the previous rows or the new ones), and the
    rerun gives the rows of a run never killed."""
    row = Row("kill while --out is written")
    root = ctx.root("out-kill")
    old_in, new_in = (
        _rows_file(root / "old.jsonl", 3000),
        _rows_file(root / "new.jsonl", 3000, label="Lyon"),
    )
    common = [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20"]
    started = time.monotonic()
    clean = root / "clean" / "res.jsonl"
    clean.parent.mkdir()
    if _scorer_proc([new_in, "--task", "classes", "--out", clean, *common]).wait(600) != 0:
        row.record("a clean run", WRONG, "failed")
        return row
    took = time.monotonic() - started
    points = (
        ["as the output is written", 0.5]
        if ctx.quick
        else ["as the output is written", 0.2, 0.5, 0.8, 0.95]
    )
    for point in points:
        folder = ctx.root("out-kill")

        def attack(folder=folder, point=point):
            out = folder / "res.jsonl"
            if _scorer_proc([old_in, "--task", "classes", "--out", out, *common]).wait(600):
                return WRONG, "the previous run failed"
            previous, stat = out.read_bytes(), out.stat()
            proc = _scorer_proc([new_in, "--task", "classes", "--out", out, *common])
            deadline = time.monotonic() + (took * point if isinstance(point, float) else 600)

            def writing() -> bool:  # its temporary file, or res.jsonl itself, being written
                now = out.stat() if out.exists() else None
                return (
                    bool(list(folder.glob(".res.jsonl.*.tmp")))
                    or now is None
                    or (now.st_size, now.st_mtime_ns) != (stat.st_size, stat.st_mtime_ns)
                )

            while proc.poll() is None and time.monotonic() < deadline:
                if not isinstance(point, float) and writing():
                    break
                time.sleep(0.002)
            killed = proc.poll() is None
            kill(proc)
            now = out.read_bytes()
            if now != previous and _same_rows(out, clean) is not None:
                return WRONG, "res.jsonl is neither the previous output nor a whole new one"
            if _scorer_proc([new_in, "--task", "classes", "--out", out, *common]).wait(600):
                return WRONG, "the rerun failed"
            if (problem := _same_rows(out, clean)) is not None:
                return WRONG, f"the rerun: {problem}"
            if list(folder.glob(".res.jsonl.*.tmp")):
                return WRONG, "the killed run's temporary file outlived the rerun"
            return IDENTICAL, "" if killed else "the run ended before the kill"

        row.record(
            f"SIGKILL {point if isinstance(point, str) else f'at {point:.0%} of the run'}",
            *outcome_of(attack),
        )
    return row


def attack_scorer_disk_full(ctx: Chaos) -> Row:
    """--out and the work folder on a real tmpfs filled to leave 0 B to 600 kB, the input in
    parts (so every kind of the scorer's writes is hit in turn: input artifacts, part pickles,
    stages, the lock, rows, summaries): exit 2 with one line naming the full disk, no
    temporary file; with the space back, the rerun gives the clean rows."""
    import io
    import shutil as sh

    from pipeline.scorer import cli, run

    row = Row("scorer on a full disk")
    root = ctx.root("scorer-disk")
    data = _rows_file(root / "in.jsonl", 7)
    common = [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20", "-q"]
    real_parts = run.PART_PROMPTS
    run.PART_PROMPTS = 3

    def scorer(out: Path) -> tuple[int, str]:
        err = io.StringIO()
        with (
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            rc = cli.main([str(data), "--task", "classes", "--out", str(out), *common])
        return rc, err.getvalue()

    try:
        clean = root / "clean.parquet"
        if scorer(clean)[0] != 0:
            row.record("a clean run", WRONG, "failed")
            return row
        leaves = (
            [0, 12_000, 90_000, 250_000]
            if ctx.quick
            else [
                0,
                3_000,
                12_000,
                25_000,
                40_000,
                60_000,
                90_000,
                150_000,
                250_000,
                400_000,
                600_000,
            ]
        )
        with small_disk(root / "disk", "3m") as disk:
            for leave in leaves:

                def attack(leave=leave):
                    out = disk / f"left{leave}" / "res.parquet"
                    out.parent.mkdir()
                    filler = disk / "filler"
                    filler.write_bytes(b"\0" * max(0, sh.disk_usage(disk).free - leave))
                    try:
                        rc, err = scorer(out)
                    finally:
                        filler.unlink()
                    try:
                        if rc == 0:
                            problem = _same_rows(out, clean)
                            return (
                                (IDENTICAL, "it fitted")
                                if problem is None
                                else (WRONG, f"exit 0 but {problem}")
                            )
                        lines = [line for line in err.splitlines() if line.startswith("error:")]
                        if (
                            rc != 2
                            or len(lines) != 1
                            or "no space left" not in lines[0]
                            or "Traceback" in err
                        ):
                            return WRONG, f"exit {rc}: {err.strip()[-300:]!r}"
                        if stray := list(out.parent.rglob("*.tmp")):
                            return WRONG, f"left {stray[0].name}"
                        if scorer(out)[0] != 0:
                            return WRONG, "the rerun with space failed"
                        if (problem := _same_rows(out, clean)) is not None:
                            return WRONG, f"the rerun: {problem}"
                        return REFUSED, lines[0][:160]
                    finally:
                        sh.rmtree(out.parent, ignore_errors=True)

                row.record(f"{leave} bytes left", *outcome_of(attack))
    finally:
        run.PART_PROMPTS = real_parts
    return row


def attack_scorers_at_once(ctx: Chaos) -> Row:
    """Three `taskaware-score` runs of one input in one work folder at the same time: each
    waits for the folder's lock, all exit 0 with the same rows."""
    row = Row("three scorers at once")
    tasks = ["sets"] if ctx.quick else ["sets", "classes", "reals"]
    for task in tasks:
        root = ctx.root("scorers")
        data = _rows_file(
            root / "in.jsonl",
            300,
            label="1" if task == "reals" else "Paris",
            reference="1" if task == "reals" else "Paris",
        )

        def attack(root=root, data=data, task=task):
            procs = [
                _scorer_proc(
                    [
                        data,
                        "--task",
                        task,
                        "--work-dir",
                        root / "work",
                        "--out",
                        root / f"out{i}.parquet",
                        f"cache_dir={root / 'cache'}",
                        "evaluation.n_bootstrap=20",
                    ],
                    log=root / f"log{i}",
                )
                for i in range(3)
            ]
            codes = [p.wait(timeout=600) for p in procs]
            if codes != [0, 0, 0]:
                return WRONG, f"exits {codes}: {(root / 'log1').read_text()[-200:]!r}"
            for i in (1, 2):
                if problem := _same_rows(root / "out0.parquet", root / f"out{i}.parquet"):
                    return WRONG, problem
            return IDENTICAL, ""

        row.record(f"task {task}", *outcome_of(attack))
    return row


def attack_scorer_sigterm(ctx: Chaos) -> Row:
    """SIGTERM / SIGINT to `taskaware-score` once its input is in the store, or in the middle
    of a 4,000-prompt run in parts: exit 75, one `stopped cleanly` line, --out untouched, and
    the rerun gives the rows of a run never stopped."""
    from pipeline.runtime.stopping import REQUEUE_EXIT

    row = Row("scorer SIGTERM / SIGINT")
    root = ctx.root("scorer-signal")
    small, large = _rows_file(root / "small.jsonl", 6), _rows_file(root / "large.jsonl", 4000)
    common = [f"cache_dir={root / 'cache'}", "evaluation.n_bootstrap=20"]
    # (label, signal, input, delay or None: once the input is stored, how it is sent)
    tries = [
        ("SIGTERM once the input is stored", signal.SIGTERM, small, None, "once"),
        ("SIGINT once the input is stored", signal.SIGINT, small, None, "once"),
        ("SIGTERM twice, 0.05 s apart (scancel)", signal.SIGTERM, small, None, "twice"),
        ("Ctrl-C to the process group of a run in parts", signal.SIGINT, large, None, "group"),
    ]
    if not ctx.quick:  # in the middle of a run in parts: once part 1's, part 2's input is stored
        tries += [
            (
                "SIGTERM once part 1 of 4,000 prompts is stored",
                signal.SIGTERM,
                large,
                None,
                "part-00000",
            ),
            (
                "SIGTERM once part 2 of 4,000 prompts is stored",
                signal.SIGTERM,
                large,
                None,
                "part-00001",
            ),
        ]
    for label, sig, data, delay, how in tries:
        folder = ctx.root("scorer-signal")

        def attack(folder=folder, sig=sig, data=data, delay=delay, how=how):
            out, work, log = folder / "res.parquet", folder / "work", folder / "log"
            args = [data, "--task", "classes", "--work-dir", work, "--out", out, *common]
            proc = _scorer_proc(args, log=log)
            deadline = time.monotonic() + (delay or 300)
            started = (
                "part-00000/prompts.pkl"
                if how == "group"
                else f"{how}/prompts.pkl"
                if how.startswith("part-")
                else "samples.parquet"
            )
            while proc.poll() is None and time.monotonic() < deadline:
                if delay is None and list(work.rglob(started)):
                    break
                time.sleep(0.01)
            if proc.poll() is not None:  # faster than the trigger: then it must be a clean run
                fresh = folder / "fresh.parquet"
                if (
                    proc.returncode == 0
                    and not _scorer_proc([data, "--task", "classes", "--out", fresh, *common]).wait(
                        600
                    )
                    and _same_rows(out, fresh) is None
                ):
                    return IDENTICAL, "the run ended before the signal"
                return WRONG, f"the run ended (exit {proc.returncode}) before the signal"
            if how == "group":  # a terminal's Ctrl-C reaches the part workers too
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
                if how == "twice":
                    time.sleep(0.05)
                    if proc.poll() is None:
                        proc.send_signal(sig)
            rc, logs = proc.wait(timeout=120), log.read_text(errors="replace")
            stopped = [line for line in logs.splitlines() if "stopped cleanly" in line]
            if "Traceback" in logs or rc != REQUEUE_EXIT or len(stopped) != 1 or out.exists():
                return WRONG, f"exit {rc}, {len(stopped)} line(s), out written: {out.exists()}"
            if _scorer_proc(args).wait(600) != 0:
                return WRONG, "the rerun failed"
            fresh = folder / "fresh.parquet"
            if _scorer_proc([data, "--task", "classes", "--out", fresh, *common]).wait(600):
                return WRONG, "a fresh run failed"
            problem = _same_rows(out, fresh)
            return (REFUSED, stopped[0][:120]) if problem is None else (WRONG, problem)

        row.record(label, *outcome_of(attack))

    def orphans():
        """SIGKILL to a scorer scoring in parts: its forked workers must die with it."""
        import psutil

        folder = ctx.root("scorer-orphans")
        proc = _scorer_proc([large, "--task", "classes", "--out", folder / "res.parquet", *common])
        parent, deadline = psutil.Process(proc.pid), time.monotonic() + 120
        while proc.poll() is None and not parent.children() and time.monotonic() < deadline:
            time.sleep(0.02)
        workers = parent.children()
        kill(proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            alive = [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
            if not alive:
                return IDENTICAL, f"{len(workers)} worker(s) gone with their parent"
            time.sleep(0.1)
        for w in alive:
            w.kill()
        return WRONG, f"{len(alive)} worker(s) still running 20 s after the parent's SIGKILL"

    row.record("SIGKILL: the part workers die with the scorer", *outcome_of(orphans))
    return row


ATTACKS = [
    attack_sigkill,
    attack_shards,
    attack_damaged,
    attack_foreign,
    attack_config,
    attack_scorer,
    attack_outside_calls,
    attack_pair_cache,
    attack_report,
    attack_concurrent,
    attack_scorer_folder,
    attack_cache_records,
    attack_secrets,
    attack_disk_full,
    attack_endpoint_faults,
    attack_sigterm,
    attack_invisible,
    attack_smollm2_wandb,
    attack_serve,
    attack_changed_input,
    attack_finaliser_signal,
    attack_edited_plugin,
    attack_scorer_out_kill,
    attack_scorer_disk_full,
    attack_scorers_at_once,
    attack_scorer_sigterm,
]


def table(rows: list[Row], wall: float) -> str:
    lines = [
        "| attack | tries | identical | refused | wrong (exit 0) |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {r.attack} | {r.tries} | {r.identical} | {r.refused} | {r.wrong} |" for r in rows]
    total = [sum(getattr(r, k) for r in rows) for k in ("tries", "identical", "refused", "wrong")]
    lines.append(
        f"\ntotal: {total[0]} tries, {total[1]} identical, {total[2]} refused, "
        f"{total[3]} wrong, in {wall:.0f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few tries per attack")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="work in DIR and leave it there (default: a temporary folder)",
    )
    args = parser.parse_args(argv)
    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        parser.error(f"--keep {work}: not empty; give a new or empty folder")
    # The pipeline's own log (warnings it gives while healing) goes to a file, not the table.
    logging.basicConfig(
        level=logging.INFO,
        filename=work / "chaos.log",
        force=True,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    logging.captureWarnings(True)
    register_configs()
    ctx = Chaos(work=work, quick=args.quick)
    say(f"working in {work} ({'quick' if args.quick else 'full'} run)")
    rows: list[Row] = []
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what the pipeline prints is progress
            setup(ctx)
            for attack in ATTACKS:
                rows.append(attack(ctx))
    finally:
        for proc in ctx.procs:
            if proc.poll() is None:
                kill(proc)
        GlobalHydra.instance().clear()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    wall = time.monotonic() - T0
    for row in rows:
        for failure in row.failures:
            say(f"WRONG in {row.attack}: {failure}")
    print(table(rows, wall), flush=True)
    return 1 if any(r.wrong for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
