# A fresh clone needs only python3 (3.10+) and the package index:
#   make test       the test suite               (PYTEST_ARGS="-q -x tests/test_example.py")
#   make example    the main example             (ARGS="--fused --mode eagle")
#   make venv       only the setup both run first
# The first run creates .venv: torch 2.13.0, the version CI tests (on CI's index its CPU build;
# on PyPI the default CUDA build, which also runs on CPU), and this package, editable, with its
# [test] extras (triton >= 3.6). Later runs reuse it; it is reinstalled only when setup.py,
# pyproject.toml or this file change.
#   make test-floor the suite on the declared floor, torch 2.11.0 + triton 3.6.0, in .venv-floor
#                   (numpy < 2.4: triton 3.6's interpreter needs it)
#                   (PyPI's torch 2.11 is the CUDA 13 build: ~2.7 GB of wheels with its nvidia-*
#                   dependencies, 4.6 GB installed; it runs on CPU)
#   make test-newer the suite on torch 2.14.1 + triton 3.8.0 in .venv-newer (the CUDA 13 build,
#                   ~5 GB installed; it runs on CPU)
#   make test-py310 the suite on Python 3.10, setup.py's floor (PYTHON310=...; torch 2.13.0,
#                   on PyPI the CUDA 13 build with triton 3.7.1) in .venv-py310

PYTHON ?= python3
VENV ?= .venv
# What pip installs with the package (shell words: pin with ==, or quote, TORCH="'torch>=2.12'")
TORCH ?= torch==2.13.0
# The suite in parallel processes, one per core up to 4 (pytest-xdist); idle workers take
# queued tests from busy ones (worksteal), so the long property tests do not hold the end.
PYTEST_ARGS ?= -q -n auto --maxprocesses=4 --dist worksteal
ARGS ?=
FLOOR = torch==2.11.0 triton==3.6.0 numpy~=2.3.0
NEWER = torch==2.14.1

.PHONY: venv test example test-floor test-newer test-py310

venv: $(VENV)/.installed

$(VENV)/.installed: setup.py pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet $(TORCH) -e '.[test]'
	touch $@

test: venv
	$(VENV)/bin/python -c "import torch, triton; print('$(VENV): torch', torch.__version__, \
	    'triton', triton.__version__)"
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

example: venv
	$(VENV)/bin/python examples/spec_decode.py $(ARGS)

# Fewer hypothesis examples per property (300 by default): the floor and newer runs check the
# versions, the default run the properties.
test-floor:
	SPEC_OPS_EXAMPLES=$${SPEC_OPS_EXAMPLES:-50} $(MAKE) test VENV=.venv-floor TORCH='$(FLOOR)'

test-newer:
	SPEC_OPS_EXAMPLES=$${SPEC_OPS_EXAMPLES:-50} $(MAKE) test VENV=.venv-newer TORCH='$(NEWER)'

PYTHON310 ?= python3.10
test-py310:
	SPEC_OPS_EXAMPLES=$${SPEC_OPS_EXAMPLES:-50} $(MAKE) test VENV=.venv-py310 PYTHON='$(PYTHON310)'
