"""Independent reference implementations for the simplex space tests (plain Python loops, no
reuse of the package's formulas)."""

from __future__ import annotations

import math


def kl(p: dict, q: dict) -> float:
    out = 0.0
    for k, pk in p.items():
        if pk <= 0:
            continue
        qk = q.get(k, 0.0)
        if qk <= 0:
            return math.inf
        out += pk * math.log(pk / qk)
    return out


def normalise(d: dict) -> dict:
    s = sum(d.values())
    return {k: v / s for k, v in d.items()}
