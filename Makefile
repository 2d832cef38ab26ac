# Two commands do everything on a fresh machine (Python 3.10+ and Java 17+ installed):
#   make demo   # creates .venv, installs locality, fetches the GraphFrames jars, runs the main job on a generated trace
#   make test   # creates .venv, installs locality with its test extras, builds and tests the JVM modules
#                 (Maven fetches their dependencies from Maven Central), fetches the GraphFrames jars,
#                 runs the whole test suite
VENV ?= .venv
PYTHON ?= python3
MVN ?= mvn -B -q

.PHONY: demo test lint jvm graphframes

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed graphframes
	$(VENV)/bin/locality demo

# The JVM modules: compiled, unit-tested (JUnit 5) and installed, so that the Python tests can run their mains.
jvm:
	$(MVN) -f jvm/pom.xml install

# GraphFrames for the jobs' embedded Spark session (pipelines/jars.py): the jar of the installed graphframes-py
# version for Spark 4 / Scala 2.13 and its runtime dependencies, copied by Maven into LOCALITY_SPARK_JARS once
# (the stamp). Where Maven cannot fetch them, the jobs compute the graph statistics on the driver: say so, go on.
LOCALITY_SPARK_JARS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/locality/jars
GRAPHFRAMES_STAMP := $(LOCALITY_SPARK_JARS)/graphframes.stamp

graphframes: $(GRAPHFRAMES_STAMP)

$(GRAPHFRAMES_STAMP): jvm/graphframes/pom.xml $(VENV)/.installed
	@mkdir -p "$(LOCALITY_SPARK_JARS)" && rm -f "$(LOCALITY_SPARK_JARS)"/graphframes-*.jar
	@version=$$($(VENV)/bin/python -c 'import graphframes; print(graphframes.__version__)') && \
	if $(MVN) -f jvm/graphframes/pom.xml package -Dgraphframes.version=$$version \
	      -Dlocality.jars="$(LOCALITY_SPARK_JARS)" > "$(LOCALITY_SPARK_JARS)/graphframes-fetch.log" 2>&1; then \
	    touch $@; \
	else \
	    echo "GraphFrames $$version not fetched: the jobs compute the graph statistics on the driver." \
	         "Maven's log: $(LOCALITY_SPARK_JARS)/graphframes-fetch.log" >&2; \
	    grep -m 1 'ERROR' "$(LOCALITY_SPARK_JARS)/graphframes-fetch.log" | sed 's/\x1b\[[0-9;]*m//g' >&2; \
	    rm -f "$(LOCALITY_SPARK_JARS)"/graphframes-*.jar; \
	fi

test: $(VENV)/.installed jvm graphframes
	$(VENV)/bin/pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
