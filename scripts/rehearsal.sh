#!/usr/bin/env bash
# The rehearsal of `experiment=paper` on this machine (`make rehearsal`): the paper sweep through
# the SLURM launcher on the local single-node cluster, with conf/rehearsal/local.yaml swapping
# only where each component comes from (docs/design.md s8). Steps:
#   1. build the local stand-ins (scripts/build_rehearsal_assets.py; skipped when up to date)
#   2. start the local SLURM cluster (scripts/slurm_local.sh; needs root) and the loopback
#      OpenAI-compatible stand-in for gpt-4.1-mini (scripts/openai_stand_in.py)
#   3. python -m pipeline -m experiment=paper +rehearsal=local hydra/launcher=slurm_local
#   4. check that every paper table and figure was written; print wall times per cell and stage
# Needs .venv, .venv-vllm and .venv-kggen (the Makefile target builds them). Extra Hydra
# overrides: REHEARSAL_ARGS="...". Outputs: outputs/rehearsal/ (results/ inside).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ASSETS=${TASK_AWARE_REHEARSAL_ASSETS:-${TASK_AWARE_CACHE:-$HOME/.cache/task-aware}/rehearsal}
export TASK_AWARE_REHEARSAL_ASSETS=$ASSETS
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export WANDB_MODE=${WANDB_MODE:-offline}
START=$(date +%s)

echo "== 1/4 rehearsal assets in $ASSETS"
"$PY" scripts/build_rehearsal_assets.py "$ASSETS"

echo "== 2/4 local SLURM cluster and the OpenAI-compatible stand-in"
eval "$(bash scripts/slurm_local.sh start | tail -1)"
export SLURM_CONF
RUN=$(mktemp -d /tmp/rehearsal.XXXXXX)
"$PY" scripts/openai_stand_in.py --port-file "$RUN/port" > "$RUN/openai.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$RUN"' EXIT
for _ in $(seq 1 100); do [[ -s $RUN/port ]] && break; sleep 0.1; done
[[ -s $RUN/port ]] || { echo "the OpenAI stand-in did not start:"; cat "$RUN/openai.log"; exit 1; }
export REHEARSAL_OPENAI_BASE_URL="http://127.0.0.1:$(cat "$RUN/port")/v1"

echo "== 3/4 python -m pipeline -m experiment=paper +rehearsal=local hydra/launcher=slurm_local"
SWEEP_START=$(date +%s)
# shellcheck disable=SC2086
"$PY" -m pipeline -m experiment=paper +rehearsal=local hydra/launcher=slurm_local ${REHEARSAL_ARGS:-}
SWEEP_END=$(date +%s)

echo "== 4/4 check and timings"
"$PY" scripts/rehearsal_summary.py outputs/rehearsal --sweep-seconds $((SWEEP_END - SWEEP_START))
echo "rehearsal finished in $(($(date +%s) - START)) s"
