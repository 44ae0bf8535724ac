"""`python -m pipeline.score FILE --task T` runs the scorer's command line, `pipeline.scorer.cli.main`
(the console script `taskaware-score`). This file exists only for `-m`.

`pipeline.score` is the function `pipeline.api.score`. Importing this file as a module would make
the package attribute `pipeline.score` this module (the import system binds a loaded submodule on
its parent), so an import is refused with the names to use instead.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from pipeline.scorer.cli import main

    sys.exit(main())

raise ImportError(
    "pipeline.score is a function (`import pipeline; pipeline.score(data, task=...)`), not a "
    "module: the scorer is pipeline.scorer (run.score, cli.main) "
    "(`python -m pipeline.score` and `taskaware-score` run it)",
    name=__name__,
)
