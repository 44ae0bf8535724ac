"""Decision methods, declared once: how each is named in artifacts (`decisions.method`), in the
scorer's columns and the W&B prompts table, and in the paper's tables.

Three kinds: `latent` methods decide from the samples' latents (the decide stage computes them
for every task: Bayes, l_MAP, l_Sample, self-consistency); `task` methods are the extra Bayes
decisions a task declares under another loss (`task.decisions`, e.g. the F-beta action); `decode`
methods are decoding strategies whose own output is the decision (greedy, beam, ...). A new
method registers here, and every table, column and inverse follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.components.registry import Registry


@dataclass(frozen=True)
class Method:
    label: str  # in tables and figures
    column: str  # output column prefix (scorer) and prompts-table column
    kind: str  # latent | task | decode
    table_order: int  # column position in the paper's tables (Table 2: baselines, then ours)
    # one of the paper's compared methods; False: an extra of ours, reported in its own rows and
    # never ranked or marked best against the paper's
    in_paper: bool = True


METHODS: Registry[Method] = Registry("decision method")
_DECLARED: list[str] = []  # declaration order: the order of decisions and scorer columns


def register_method(name: str, method: Method) -> Method:
    METHODS.add(name, method)
    if name not in _DECLARED:
        _DECLARED.append(name)
    return method


register_method("bayes", Method("Bayes (ours)", "bayes", "latent", 7))
register_method("bayes_fbeta", Method("Bayes F1 (ours)", "bayes_fbeta", "task", 8, in_paper=False))
register_method("map", Method("l_MAP", "l_map", "latent", 5))  # the paper's l_MAP and l_Sample
register_method("sample_mbr", Method("l_Sample", "l_sample", "latent", 6))
register_method("self_consistency", Method("Self-Consistency", "self_consistency", "latent", 1))
register_method("beam", Method("Beam", "beam", "decode", 0))
register_method("contrastive", Method("Contr.", "contrastive", "decode", 2))
register_method("ar", Method("AR", "ar", "decode", 3))
register_method("greedy", Method("Greedy", "greedy", "decode", 4))


# The comparison the product reports (headline, prompts table, scorer summary, UQ targets): the
# paper's decision, the Bayes action, against the decoding baseline the paper also targets, beam.
OURS = "bayes"
BASELINE = "beam"
# The F1 reading of the set and graph tasks: their Bayes decision under the F-beta loss.
F_BETA = "bayes_fbeta"


def extra_methods() -> set[str]:
    """Methods of ours the paper does not compare (never ranked against its)."""
    return {n for n in METHODS.names() if not METHODS[n].in_paper}


def methods(*kinds: str) -> tuple[str, ...]:
    """Registered method names of these kinds (all without), in declaration order."""
    return tuple(n for n in _DECLARED if not kinds or METHODS[n].kind in kinds)


def table_methods() -> tuple[str, ...]:
    """Every method in the order of the paper's tables."""
    return tuple(sorted(_DECLARED, key=lambda n: METHODS[n].table_order))


def method_label(name: str) -> str:
    return METHODS[name].label if name in METHODS else name


def method_column(name: str) -> str:
    return METHODS[name].column if name in METHODS else name


def method_of_column(column: str) -> str | None:
    """The inverse of `method_column`: the method whose column this is, or None."""
    return next((n for n in METHODS.names() if METHODS[n].column == column), None)
