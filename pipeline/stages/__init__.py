"""The stage modules, one per stage: generate, map, decide, uq, evaluate. Each registers its
function with `pipeline.artifacts.stage.stage` (the contract, cache keys and runner); `pipeline.driver.job` runs
them for a cell and builds the report (`pipeline.reporting`).
"""
