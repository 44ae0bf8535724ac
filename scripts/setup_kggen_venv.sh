#!/usr/bin/env bash
# Create the separate KGGen environment (default .venv-kggen) for graph extraction with KGGen.
#
# Why a separate venv: kg-gen 0.4.0 pulls dspy 3.4 / litellm 1.106, which downgrade packages the
# main env needs (openai 3.x -> 2.x, filelock 4.x -> 3.x, python-dateutil 4.x -> 2.9; measured
# with `pip install --dry-run -c constraints.txt kg-gen`, 2026-11-22), and the same holds in
# .venv-vllm. The map stage stays in the main env and sends the texts of each prompt to
# `pipeline.tasks.graphs.kggen_worker` running with this venv's python (`extractor.kggen_python`).
#
# Usage: scripts/setup_kggen_venv.sh [VENV_DIR]       (default: .venv-kggen, relative to the repo)
# Idempotent: a stamp file keyed by this script's hash (and venv_common.sh's) marks a finished install.
set -euo pipefail

# The venv with torch==2.13.0 (the local CPU build) first: sentence-transformers, a kg-gen
# dependency, needs torch; see venv_common.sh.
source "$(dirname "${BASH_SOURCE[0]}")/venv_common.sh" kggen .venv-kggen "$@"

# kg-gen and the dspy/litellm it was measured with, torch held where it is.
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
printf 'torch==2.13.0\nkg-gen==0.4.0\ndspy==3.4.1\nlitellm==1.106.2\n' >"$CONSTRAINTS"
"${PIP[@]}" install -q -c "$CONSTRAINTS" kg-gen

# The project itself, without the main env's pins: the worker imports only the standard library,
# kg_gen and dspy.
"${PIP[@]}" install -q --no-deps -e "$REPO_DIR"

"$VENV_DIR/bin/python" -c "import kg_gen, dspy, litellm, pipeline.tasks.graphs.kggen_worker; print('kg-gen ok, dspy', dspy.__version__)"
touch "$STAMP"
echo "kggen venv ready: $VENV_DIR in $(($(date +%s) - START_S)) s, size $(du -sh "$VENV_DIR" | cut -f1)"
