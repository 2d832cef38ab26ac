# Two commands do everything on a fresh machine (Python 3.10+ and Java 17+ installed):
#   make demo   # creates .venv, installs locality, runs the main job on a generated trace
#   make test   # creates .venv, installs locality with its test extras, builds and tests the JVM modules
#                 (Maven fetches their dependencies from Maven Central), runs the whole test suite
VENV ?= .venv
PYTHON ?= python3
MVN ?= mvn -B -q

.PHONY: demo test lint jvm

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/locality demo

# The JVM modules: compiled, unit-tested (JUnit 5) and installed, so that the Python tests can run their mains.
jvm:
	$(MVN) -f jvm/pom.xml install

test: $(VENV)/.installed jvm
	$(VENV)/bin/pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
