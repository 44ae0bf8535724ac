"""The import graph of `pipeline/`: cycles, upward imports between layers, function-level imports.

    python scripts/import_graph.py            # counts
    python scripts/import_graph.py --edges    # + every upward or function-level import
    python scripts/import_graph.py --config   # + every function that takes the whole config
    python scripts/import_graph.py --sizes    # + every function over 60 lines or 8 parameters,
                                              #   with its `# size:` reason

Layers, lowest first (a module may import its own layer and those below, never above):
0 base: runtime (errors, devices, the hub probe and revisions, keys, stop signals, progress,
  install extras, where the package's files are), components (the registry, typed part
  settings, the decision methods), text (answer normal forms, the lexicon), artifacts (column
  contracts, the store, the stage contract)
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
5 app: the driver (the Hydra job, plan, assets, callbacks, the command line's key check:
  overrides, the doctor), config, tracking, reporting, the scorer, the server (serve), __main__
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
    # the foundation, one package per concern (none imports a package above it)
    "base": ("pipeline.runtime", "pipeline.components", "pipeline.text", "pipeline.artifacts"),
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
        "pipeline.driver",
        "pipeline.config",
        "pipeline.tracking",
        "pipeline.reporting",
        "pipeline.scorer",
        "pipeline.serve",
        "pipeline.__main__",
        "pipeline.score",
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
    "pipeline.driver.job",
    "pipeline.__main__",
    "pipeline.driver.callbacks",
    "pipeline.driver.overrides",
    "pipeline.driver.doctor",
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
REASON = "# size:"  # the reason's marker, in the comment block right above the def (or decorators)


@dataclass(frozen=True)
class LargeFunction:
    module: str
    function: str
    line: int
    lines: int
    parameters: int
    reason: str  # "" where none is written


def _reason(source_lines: list[str], node: ast.AST) -> str:
    """The `# size: ...` reason in the comment block right above the function's first line."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    found = []
    i = first - 2
    while i >= 0 and source_lines[i].strip().startswith("#"):
        found.insert(0, source_lines[i].strip())
        i -= 1
    text = " ".join(found)
    return (
        text[text.index(REASON) + len(REASON) :].replace("# ", "").strip() if REASON in text else ""
    )


def large_functions(root: Path = ROOT) -> list[LargeFunction]:
    """Every function over LONG_FUNCTION lines or MANY_PARAMETERS parameters (self/cls not
    counted), with the reason written next to it."""
    out = []
    for module, path in modules(root).items():
        source = path.read_text(encoding="utf-8")
        source_lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
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
                out.append(
                    LargeFunction(
                        module,
                        node.name,
                        node.lineno,
                        length,
                        len(params),
                        _reason(source_lines, node),
                    )
                )
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
        f"functions over {LONG_FUNCTION} lines {sum(f.lines > LONG_FUNCTION for f in large)}, "
        f"over {MANY_PARAMETERS} parameters {sum(f.parameters > MANY_PARAMETERS for f in large)}, "
        f"without a reason written next to them {sum(not f.reason for f in large)}"
    )
    if args.sizes:
        for f in sorted(large, key=lambda f: (bool(f.reason), -f.lines)):
            print(
                f"  size {f.module}:{f.line} {f.function}: {f.lines} lines, {f.parameters} "
                f"parameters: {f.reason or 'NO REASON'}"
            )
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
