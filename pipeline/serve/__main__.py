"""`python -m pipeline.serve ...` = `taskaware serve ...` (pipeline/serve/cli.py)."""

import sys

from pipeline.serve.cli import main

sys.exit(main())
