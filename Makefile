# Two commands do everything on a fresh machine (Python 3.10+ and Java 17+ installed):
#   make demo   # creates .venv, installs locality, runs the main job on a generated trace
#   make test   # creates .venv, installs locality with its test extras, runs the whole test suite
VENV ?= .venv
PYTHON ?= python3

.PHONY: demo test lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/locality demo

test: $(VENV)/.installed
	$(VENV)/bin/pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
