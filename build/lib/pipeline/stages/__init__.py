"""The stage modules, one per stage: generate, map, decide, uq, evaluate. Each registers its
function with `pipeline.stage.stage` (the contract, cache keys and runner); `pipeline.app` runs
them for a cell and builds the report (`pipeline.reporting`).
"""
