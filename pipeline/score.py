"""`python -m pipeline.score FILE --task T`: the scorer's command line (pipeline.scoring).

`pipeline.score` itself is the function `pipeline.api.score`. Importing this module would make the
package attribute `pipeline.score` this module (the import system binds a loaded submodule on its
parent), so the module is made callable as that same function: `pipeline.score(data)` works
whichever of the two the name holds, and old `from pipeline.score import score` keeps working.
"""

from __future__ import annotations

import sys
import types

from pipeline import api, scoring

if __name__ == "__main__":
    sys.exit(scoring.main())


class _ScoreModule(types.ModuleType):
    __doc__ = api.score.__doc__

    def __call__(self, *args, **kwargs):
        return api.score(*args, **kwargs)

    def __getattr__(self, name: str):  # from pipeline.score import compose_config, ...
        return getattr(scoring, name)


sys.modules[__name__].__class__ = _ScoreModule
