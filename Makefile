# Both targets create (or reuse) a local virtual environment in .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

.PHONY: run test bench
run: $(VENV)/.installed
	$(PY) examples/main.py

test: $(VENV)/.installed
	$(PY) -m pytest tests
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/lit -sv tests/lit
