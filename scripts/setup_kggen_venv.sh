#!/usr/bin/env bash
# Create the separate KGGen environment (default .venv-kggen) for graph extraction with KGGen.
#
# Why a separate venv: kg-gen 0.4.0 pulls dspy 3.4 / litellm 1.106, which downgrade packages the
# main env needs (openai 3.x -> 2.x, filelock 4.x -> 3.x, python-dateutil 4.x -> 2.9; measured
# with `pip install --dry-run -c constraints.txt kg-gen`, 2026-11-22), and the same holds in
# .venv-vllm. The map stage stays in the main env and sends the texts of each prompt to
# `pipeline.mapping.kggen_worker` running with this venv's python (`extractor.kggen_python`).
#
# Usage: scripts/setup_kggen_venv.sh [VENV_DIR]       (default: .venv-kggen, relative to the repo)
# Idempotent: a stamp file keyed by this script's hash marks a finished install.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${1:-${VENV_DIR:-.venv-kggen}}"
case "$VENV_DIR" in /*) ;; *) VENV_DIR="$REPO_DIR/$VENV_DIR" ;; esac
PYTHON="${PYTHON:-python3.11}"
SCRIPT_HASH="$(sha1sum "${BASH_SOURCE[0]}" | cut -c1-12)"
STAMP="$VENV_DIR/.installed-$SCRIPT_HASH"

if [[ -f "$STAMP" ]]; then
  echo "kggen venv up to date: $VENV_DIR ($(basename "$STAMP"))"
  exit 0
fi

start_s=$(date +%s)
command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found; set PYTHON=/path/to/python3.11" >&2; exit 1; }
[[ -x "$VENV_DIR/bin/python" ]] || "$PYTHON" -m venv "$VENV_DIR"
rm -f "$VENV_DIR"/.installed-*
PIP=("$VENV_DIR/bin/python" -m pip)
"${PIP[@]}" install -q --upgrade "pip<26" wheel

# torch first (sentence-transformers, a kg-gen dependency, needs it): `torch==2.13.0` is the
# local CPU build; held by a constraint so nothing later swaps it for CUDA wheels.
"${PIP[@]}" install -q torch==2.13.0
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
printf 'torch==2.13.0\nkg-gen==0.4.0\ndspy==3.4.1\nlitellm==1.106.2\n' >"$CONSTRAINTS"
"${PIP[@]}" install -q -c "$CONSTRAINTS" kg-gen

# The project itself, without the main env's pins: the worker imports only the standard library,
# kg_gen and dspy.
"${PIP[@]}" install -q --no-deps -e "$REPO_DIR"

"$VENV_DIR/bin/python" -c "import kg_gen, dspy, litellm, pipeline.mapping.kggen_worker; print('kg-gen ok, dspy', dspy.__version__)"
touch "$STAMP"
end_s=$(date +%s)
echo "kggen venv ready: $VENV_DIR in $((end_s - start_s)) s, size $(du -sh "$VENV_DIR" | cut -f1)"
