"""`python -m pipeline.score FILE --task T` runs the scorer's command line, `pipeline.scoring.main`
(the console script `taskaware-score`). This file exists only for `-m`.

`pipeline.score` is the function `pipeline.api.score`. Importing this file as a module would make
the package attribute `pipeline.score` this module (the import system binds a loaded submodule on
its parent), so an import is refused with the names to use instead.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from pipeline.scoring import main

    sys.exit(main())

raise ImportError(
    "pipeline.score is a function (`import pipeline; pipeline.score(data, task=...)`), not a "
    "module: import the scorer's command line and helpers from pipeline.scoring "
    "(`python -m pipeline.score` and `taskaware-score` run it)", name=__name__)
