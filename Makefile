# Set-up and entry points. `make demo` and `make test` work on a fresh machine with python3 (venv) and make.
VENV ?= .venv
PYTHON ?= python3
# The torch / torchvision pair for this project's CPU machines; override for another platform, e.g.
#   make test TORCH_SPEC="torch==2.9.1 torchvision==0.24.1"
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup data demo test lint format docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[dev,onnx,dashboard,docs]'
	touch $(STAMP)

setup: $(STAMP)

# The demo's and the tests' data (`nas data`): Fashion-MNIST found, else Debian's dataset-fashion-mnist installed
# (root with apt-get), else torchvision's download; where neither works, one sentence naming the ways (exit 2).
data: setup
	$(VENV)/bin/nas data

# The embedded default: a few CPU minutes of real proxy-trained search on Fashion-MNIST, ending with the path
# of runs/coatnet-proxy/report.html (`nas search --resume` continues it; `rm -rf runs/coatnet-proxy` restarts).
demo: setup data
	$(VENV)/bin/nas search

# The suite in TEST_WORKERS processes (pytest-xdist; 0 runs it in this one): faster even on 2 cores (README,
# Set-up). Work stealing evens out the long tests at the end.
TEST_WORKERS ?= 2
test: setup data
	$(PY) -X faulthandler -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# ruff, then the layers (pyproject.toml's import-linter contract: imports run downward only)
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# The documentation site into site/ (open site/index.html, offline); --strict: a broken link, a missing page
# or an unresolved API reference fails the build
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PY) benchmarks/bench_local_attention.py
	$(PY) benchmarks/bench_local_attention.py --shape proxy
	$(PY) benchmarks/bench_local_attention.py --shape sasa
	$(PY) benchmarks/bench_memory_format.py
	$(PY) benchmarks/bench_drivers.py
	$(PY) benchmarks/bench_vs_timm.py
	$(PY) benchmarks/bench_supernet.py
	$(PY) benchmarks/bench_proxy.py
	$(PY) benchmarks/bench_cost_scaling.py
	$(PY) benchmarks/bench_search.py
	$(PY) benchmarks/bench_latency.py
	$(PY) benchmarks/bench_rejection_cost.py
	$(PY) benchmarks/bench_oneshot_scale.py
	$(PY) benchmarks/bench_workers.py
	$(PY) benchmarks/bench_busy_cores.py --spincounts default 1000 --rounds 3 --one-thread --archs 1
	$(PY) benchmarks/bench_fidelity.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis site
