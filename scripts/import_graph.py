"""The import graph of `pipeline/`: cycles, upward imports between layers, function-level imports.

    python scripts/import_graph.py            # counts
    python scripts/import_graph.py --edges    # + every upward or function-level import
    python scripts/import_graph.py --config   # + every function that takes the whole config
    python scripts/import_graph.py --sizes    # + every function over 60 lines or 8 parameters

Layers, lowest first (a module may import its own layer and those below, never above):
0 base: errors, registry, text, lexicon, schema, store, devices, the stage contract (stage.py),
  typed part settings (parts.py), where the package's conf/ and paper numbers are (resources.py),
  the decision methods (methods.py), progress lines (progress.py), the hub probe (offline.py),
  hub revisions (revisions.py)
1 latent: the closed-form maths (numpy only): pipeline.latent and each task folder's space.py
  (pipeline/tasks/<task>/space.py), with the tasks package's and folders' __init__, which import
  nothing
2 components, in sub-layers, lowest first: clients (the endpoint client, the record caches),
  data, evaluation, mapping (the g_T building blocks), generation, uncertainty, aux_models (the
  factories of the auxiliary models; the stages hand what they build to the parts above)
3 tasks: the rest of each task folder (task.py binds its mapper, reference kind and metrics;
  reading.py reads its responses; metrics.py holds its metric maths) and the generic modules
  they are written against (contract, builders, text_metrics), which import no task folder
  (tests/test_generic_layers.py checks every module outside the task folders)
4 stages: one function per stage
5 app: the driver (app, plan, assets, config, callbacks, tracking, reporting, the command
  line's key check: overrides), the scorer, the server (serve), __main__
Importing `pipeline.a.b` runs `pipeline/a/__init__.py` too, so that edge is counted. In LAYERS a
`*` stands for one name (a name outranks it), and a leading `=` matches that module alone (not
what is below it).
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS = {
    "base": (
        "pipeline.errors",
        "pipeline.registry",
        "pipeline.text",
        "pipeline.lexicon",
        "pipeline.schema",
        "pipeline.store",
        "pipeline.devices",
        "pipeline.stage",
        "pipeline.methods",
        "pipeline.parts",
        "pipeline.resources",
        "pipeline.progress",
        "pipeline.offline",
        "pipeline.extras",
        "pipeline.secrets",
        "pipeline.stopping",
        "pipeline.revisions",
    ),
    "latent": ("pipeline.latent", "=pipeline.tasks", "=pipeline.tasks.*", "pipeline.tasks.*.space"),
    # the components, in sub-layers: each imports only the ones listed before it
    "clients": ("pipeline.clients",),
    "data": ("pipeline.data",),
    "evaluation": ("pipeline.evaluation",),
    "mapping": ("pipeline.mapping",),
    "generation": ("pipeline.generation",),
    "uncertainty": ("pipeline.uncertainty",),
    "aux_models": ("pipeline.aux_models",),
    "tasks": (
        "pipeline.tasks",
        "pipeline.tasks.contract",
        "pipeline.tasks.builders",
        "pipeline.tasks.shared_metrics",
    ),
    "stages": ("pipeline.stages",),
    "app": (
        "pipeline.app",
        "pipeline.plan",
        "pipeline.assets",
        "pipeline.config",
        "pipeline.callbacks",
        "pipeline.overrides",
        "pipeline.tracking",
        "pipeline.reporting",
        "pipeline.scorer",
        "pipeline.__main__",
        "pipeline.score",
        "pipeline.doctor",
        "pipeline.serve",
    ),
    # the package root re-exports the practitioner API (pipeline.score, generate_and_score, ...)
    "api": ("pipeline.api",),
    # other tools' plug-ins: lm-evaluation-harness's task_aware filter and metrics call the API
    "harness": ("pipeline.harness",),
}
ORDER = list(LAYERS)


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in sorted((root / "pipeline").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def layer(module: str) -> str:
    """The layer of a module: the longest prefix listed in LAYERS."""
    if module == "pipeline":
        return "api"
    best, depth = None, -1
    for name, prefixes in LAYERS.items():
        for prefix in prefixes:
            exact, pattern = prefix.startswith("="), prefix.lstrip("=").split(".")
            parts = module.split(".")
            head = parts[: len(pattern)]
            matches = len(head) == len(pattern) and all(
                p in ("*", h) for p, h in zip(pattern, head)
            )
            rank = len(pattern) - pattern.count("*") / 2  # a name outranks a `*` in its place
            if matches and (not exact or len(parts) == len(pattern)) and rank > depth:
                best, depth = name, rank
    if best is None:
        raise KeyError(f"{module} is in no layer of scripts/import_graph.py: add it to LAYERS")
    return best


def imports(root: Path = ROOT) -> list[Import]:
    mods = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        nested = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for sub in ast.walk(node)
        }
        typing_only = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in ast.walk(node)
        }  # annotations only: never run
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            else:
                continue
            for name in names:
                target = resolve(name) if name.startswith("pipeline") else None
                if target is None:
                    continue
                # importing pipeline.a.b also runs pipeline.a's __init__ (not the root's)
                chain = target.split(".")
                parents = [".".join(chain[:i]) for i in range(2, len(chain))]
                for t in [p for p in parents if not module.startswith(p + ".")] + [target]:
                    if t != module and t in mods:
                        out.append(Import(module, t, node.lineno, id(node) in nested))
    return out


def cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = defaultdict(set)
    for e in edges:
        graph[e.source].add(e.target)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward(edges: list[Import]) -> list[Import]:
    return [e for e in edges if ORDER.index(layer(e.target)) > ORDER.index(layer(e.source))]


# Where Hydra's config may be read: the resolving layer (pipeline.config: its schema, its checks
# and its one reading into the typed cell) and the entry points that compose one. Anywhere else a
# function takes the resolved objects (docs/design.md, s9b "Resolved once").
CONFIG_READERS = (
    "pipeline.config",
    "pipeline.app",
    "pipeline.__main__",
    "pipeline.callbacks",
    "pipeline.overrides",
    "pipeline.secrets",
    "pipeline.doctor",
    "pipeline.scorer.run",
)


@dataclass(frozen=True)
class ConfigTaker:
    module: str
    function: str
    line: int
    parameter: str


def config_takers(root: Path = ROOT) -> list[ConfigTaker]:
    """Functions that take the whole Hydra config: a parameter named `cfg` (the project's name
    for it) or annotated DictConfig."""
    out = []
    for module, path in modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if "DictConfig" in note or arg.arg == "cfg":
                    out.append(ConfigTaker(module, node.name, node.lineno, arg.arg))
    return out


LONG_FUNCTION = 60  # lines (CONTRIBUTING.md): longer needs a reason next to it
MANY_PARAMETERS = 8  # a parameter object where a signature grows


def large_functions(root: Path = ROOT) -> list[tuple[str, str, int, int, int]]:
    """(module, function, line, lines, parameters) of every function over LONG_FUNCTION lines or
    MANY_PARAMETERS parameters (self/cls not counted)."""
    out = []
    for module, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            params = [
                p.arg
                for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]
                if p.arg not in ("self", "cls")
            ]
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > LONG_FUNCTION or len(params) > MANY_PARAMETERS:
                out.append((module, node.name, node.lineno, length, len(params)))
    return out


def outside_readers(takers: list[ConfigTaker]) -> list[ConfigTaker]:
    """The config takers outside the resolving layer and the entry points."""
    return [
        t
        for t in takers
        if not any(t.module == r or t.module.startswith(r + ".") for r in CONFIG_READERS)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edges", action="store_true")
    parser.add_argument(
        "--config", action="store_true", help="list every function taking the config"
    )
    parser.add_argument("--sizes", action="store_true", help="list the long or wide functions")
    parser.add_argument("--root", type=Path, default=ROOT, help="another checkout (before/after)")
    args = parser.parse_args()
    mods = modules(args.root)
    edges = imports(args.root)
    up = upward(edges)
    found = cycles(edges)
    lines = defaultdict(int)
    for module, path in mods.items():
        lines[layer(module)] += len(path.read_text(encoding="utf-8").splitlines())
    print(
        f"modules {len(mods)}, internal imports {len(edges)} "
        f"({sum(e.in_function for e in edges)} inside functions)"
    )
    print(
        f"cycles {len(found)} ({sum(map(len, found))} modules): "
        + "; ".join(" <-> ".join(c) for c in found)
    )
    print(f"upward imports {len(up)}")
    print("lines per layer: " + ", ".join(f"{k} {lines[k]}" for k in ORDER))
    takers = config_takers(args.root)
    outside = outside_readers(takers)
    print(
        f"functions taking the whole config {len(takers)} ({len(outside)} outside the "
        f"resolving layer and the entry points: {', '.join(CONFIG_READERS)})"
    )
    large = large_functions(args.root)
    print(
        f"functions over {LONG_FUNCTION} lines {sum(n > LONG_FUNCTION for *_, n, _ in large)}, "
        f"over {MANY_PARAMETERS} parameters {sum(p > MANY_PARAMETERS for *_, p in large)}"
    )
    if args.sizes:
        for module, name, line, n, p in sorted(large, key=lambda r: -r[3]):
            print(f"  size {module}:{line} {name}: {n} lines, {p} parameters")
    if args.edges or args.config:
        for t in takers if args.config else outside:
            print(f"  cfg  {t.module}:{t.line} {t.function}({t.parameter})")
    if args.edges:
        for e in up:
            print(
                f"  up   {e.source}:{e.line} -> {e.target} ({layer(e.source)} -> {layer(e.target)})"
            )
        for e in edges:
            if e.in_function:
                print(f"  func {e.source}:{e.line} -> {e.target}")


if __name__ == "__main__":
    main()
