# Two commands do everything on a fresh machine (Python 3.10+ and Java 17+ installed):
#   make demo   # creates .venv, installs locality, fetches the GraphFrames jars, runs the main job on a generated trace
#   make test   # creates .venv, installs locality with its test extras, builds and tests the JVM modules
#                 (Maven fetches their dependencies from Maven Central), fetches the GraphFrames jars,
#                 runs the whole test suite (after installing the S3 server its tests start: `make s3server`)
VENV ?= .venv
PYTHON ?= python3
MVN ?= mvn -B -q

.PHONY: demo test lint jvm graphframes s3a s3server flink-s3

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed graphframes s3a
	$(VENV)/bin/locality demo

# The JVM modules: compiled, unit-tested (JUnit 5) and installed, so that the Python tests can run their mains.
jvm:
	$(MVN) -f jvm/pom.xml install

# GraphFrames for the jobs' embedded Spark session (pipelines/jars.py): the jar of the installed graphframes-py
# version for Spark 4 / Scala 2.13 and its runtime dependencies, copied by Maven into LOCALITY_SPARK_JARS once (the
# stamp). Where Maven cannot fetch them, the jar in LOCALITY_SHARED_JARS (../shared/jars beside the checkout, built
# from GraphFrames' source: its README) is copied instead; with neither, the jobs compute the graph statistics on the
# driver: say so, go on. As for s3a, the stamp lists the jars this target copied, and only those are ever removed:
# GraphFrames jars the user put there are left alone, and then nothing is fetched (two GraphFrames would clash).
LOCALITY_SPARK_JARS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/locality/jars
LOCALITY_SHARED_JARS ?= $(abspath $(CURDIR)/../shared/jars)
GRAPHFRAMES_STAMP := $(LOCALITY_SPARK_JARS)/graphframes.stamp

graphframes: $(GRAPHFRAMES_STAMP)

$(GRAPHFRAMES_STAMP): jvm/graphframes/pom.xml $(VENV)/.installed
	@mkdir -p "$(LOCALITY_SPARK_JARS)"
	@jars="$(LOCALITY_SPARK_JARS)" && staging="$$jars/.graphframes-staging" && rm -rf "$$staging" && mkdir "$$staging" && \
	if [ -f $@ ]; then while read -r jar; do rm -f "$$jars/$$jar"; done < $@; rm -f $@; fi; \
	theirs=$$(cd "$$jars" && ls graphframes-*.jar 2>/dev/null); \
	version=$$($(VENV)/bin/python -c 'import graphframes; print(graphframes.__version__)'); \
	if [ -n "$$theirs" ]; then \
	    echo "GraphFrames: using the jars already in $$jars (not fetched by this set-up, left as they are):" $$theirs >&2; \
	elif $(MVN) -f jvm/graphframes/pom.xml package -Dgraphframes.version=$$version -Dlocality.jars="$$staging" \
	      > "$$jars/graphframes-fetch.log" 2>&1; then \
	    echo "GraphFrames $$version fetched from Maven into $$jars" >&2; \
	else \
	    rm -f "$$staging"/*.jar; \
	    echo "GraphFrames $$version not fetched by Maven (its log: $$jars/graphframes-fetch.log):" \
	         "$$(grep -m 1 'ERROR' "$$jars/graphframes-fetch.log" | sed 's/\x1b\[[0-9;]*m//g')" >&2; \
	    if ls "$(LOCALITY_SHARED_JARS)"/graphframes-*.jar > /dev/null 2>&1; then \
	        cp "$(LOCALITY_SHARED_JARS)"/graphframes-*.jar "$$staging"/ && \
	        echo "GraphFrames: copied" $$(cd "$$staging" && ls) "from $(LOCALITY_SHARED_JARS) instead" >&2; \
	    else \
	        echo "no GraphFrames jar in $(LOCALITY_SHARED_JARS) either: the jobs compute the graph statistics on" \
	             "the driver, and the GraphFrames test skips" >&2; \
	    fi; \
	fi; \
	if ls "$$staging"/*.jar > /dev/null 2>&1; then \
	    (cd "$$staging" && ls *.jar) > $@.tmp && mv "$$staging"/*.jar "$$jars/" && mv $@.tmp $@; \
	elif [ -n "$$theirs" ]; then : > $@; fi; \
	rm -rf "$$staging"

# Hadoop's s3a connector for the jobs' embedded Spark session (pipelines/jars.py), so that they read s3a:// traces:
# hadoop-aws of the Hadoop version PySpark bundles and the AWS SDK modules it loads (13 MB; not the SDK's 600 MB
# bundle: jvm/s3a/pom.xml), copied by Maven into LOCALITY_SPARK_JARS once. The stamp lists the jars it copied, so a
# new fetch (a new pom or PySpark) removes those and no other jar there. Where Maven cannot fetch them: say so, go on.
S3A_STAMP := $(LOCALITY_SPARK_JARS)/s3a.stamp

s3a: $(S3A_STAMP)

$(S3A_STAMP): jvm/s3a/pom.xml $(VENV)/.installed
	@mkdir -p "$(LOCALITY_SPARK_JARS)"
	@staging="$(LOCALITY_SPARK_JARS)/.s3a-staging" && rm -rf "$$staging" && \
	hadoop=$$($(VENV)/bin/python -c 'import pathlib, pyspark; print(next(pathlib.Path(pyspark.__file__).parent.glob("jars/hadoop-client-api-*.jar")).stem.removeprefix("hadoop-client-api-"))') && \
	if $(MVN) -f jvm/s3a/pom.xml package -Dhadoop.version=$$hadoop -Dlocality.jars="$$staging" \
	      > "$(LOCALITY_SPARK_JARS)/s3a-fetch.log" 2>&1; then \
	    if [ -f $@ ]; then while read -r jar; do rm -f "$(LOCALITY_SPARK_JARS)/$$jar"; done < $@; fi; \
	    (cd "$$staging" && ls *.jar) > $@.tmp && mv "$$staging"/*.jar "$(LOCALITY_SPARK_JARS)/" && \
	    rmdir "$$staging" && mv $@.tmp $@; \
	else \
	    echo "Hadoop $$hadoop's s3a connector not fetched: the jobs read no s3a:// trace." \
	         "Maven's log: $(LOCALITY_SPARK_JARS)/s3a-fetch.log" >&2; \
	    grep -m 1 'ERROR' "$(LOCALITY_SPARK_JARS)/s3a-fetch.log" | sed 's/\x1b\[[0-9;]*m//g' >&2; \
	    rm -rf "$$staging"; \
	fi

# The S3-compatible server the tests start (testbed/s3server.py): the Versity S3 Gateway, built by `go install`
# from the Go module proxy (about 2.5 minutes on two cores, once). A real server, so that the conditional writes
# the store's protocol rests on are refused by the server itself (docs/store-protocol.md).
LOCALITY_BIN ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/locality/bin
VERSITYGW_VERSION := v1.8.0
S3_SERVER := $(LOCALITY_BIN)/versitygw
S3_SERVER_STAMP := $(LOCALITY_BIN)/versitygw-$(VERSITYGW_VERSION).stamp

s3server: $(S3_SERVER_STAMP)

$(S3_SERVER_STAMP):
	@mkdir -p "$(LOCALITY_BIN)"
	GOBIN="$(LOCALITY_BIN)" GOFLAGS=-mod=mod go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	touch $@

# Flink's S3 file system (flink-s3-fs-hadoop, jvm/flink-s3/pom.xml) for the Flink distribution the Flink tests and the
# testbed run: copied by Maven into LOCALITY_FLINK_PLUGINS/s3-fs-hadoop/ once (the stamp); the tests install it into the
# distribution's plugins/ (locality/engines/flink_s3.py), so savepoints go to S3. Where Maven cannot fetch it: say so,
# go on (the tests that need it then fail naming this target).
LOCALITY_FLINK_PLUGINS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/locality/flink-plugins
FLINK_S3_STAMP := $(LOCALITY_FLINK_PLUGINS)/s3-fs-hadoop.stamp

flink-s3: $(FLINK_S3_STAMP)

$(FLINK_S3_STAMP): jvm/flink-s3/pom.xml
	@mkdir -p "$(LOCALITY_FLINK_PLUGINS)" && rm -rf "$(LOCALITY_FLINK_PLUGINS)/s3-fs-hadoop"
	@if $(MVN) -f jvm/flink-s3/pom.xml package -Dlocality.flink.plugins="$(LOCALITY_FLINK_PLUGINS)" \
	      > "$(LOCALITY_FLINK_PLUGINS)/s3-fs-hadoop-fetch.log" 2>&1; then \
	    touch $@; \
	else \
	    echo "Flink's S3 plugin not fetched: the Flink tests cannot write savepoints to S3." \
	         "Maven's log: $(LOCALITY_FLINK_PLUGINS)/s3-fs-hadoop-fetch.log" >&2; \
	    grep -m 1 'ERROR' "$(LOCALITY_FLINK_PLUGINS)/s3-fs-hadoop-fetch.log" | sed 's/\x1b\[[0-9;]*m//g' >&2; \
	    rm -rf "$(LOCALITY_FLINK_PLUGINS)/s3-fs-hadoop"; \
	fi

test: $(VENV)/.installed jvm graphframes s3a s3server flink-s3
	$(VENV)/bin/pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
