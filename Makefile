# binlake — `make help` lists the targets.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export SPARK_LOCAL_IP := 127.0.0.1
export BINLAKE_IVY_DIR := $(CURDIR)/.cache/ivy
export PYSPARK_PYTHON := $(CURDIR)/$(VENV)/bin/python
DB_ENV = eval "$$(scripts/db.sh env)"

.PHONY: help setup db-up db-down test lint unit integration run bench soak clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

setup: .cache/.java $(VENV)/.installed .cache/.delta-jars .cache/.class-archive .cache/lts-runtime/.installed /usr/sbin/mariadbd /usr/bin/pt-online-schema-change ## Java 17 if missing, virtualenv, MariaDB server, Percona Toolkit (tests), Delta jars, the LTS runtime (tests)

$(VENV)/.installed: pyproject.toml /usr/include/mariadb/mysql.h
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[local,dev,fast]'
	touch $@

/usr/sbin/mariadbd /usr/include/mariadb/mysql.h:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client \
		libmariadb-dev pkg-config >/dev/null

# The tests run the real pt-online-schema-change, the usual way a large table is altered.
/usr/bin/pt-online-schema-change:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq percona-toolkit >/dev/null

# Spark needs Java 17 or later: Debian's headless JRE is installed when no `java` answers, or
# when the one on the PATH is older.
.cache/.java:
	@mkdir -p .cache
	@if ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then \
		echo "installing Java 17 (openjdk-17-jre-headless)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			openjdk-17-jre-headless >/dev/null; \
	fi
	@java -version 2>&1 | head -1
	touch $@

.cache/.delta-jars: .cache/.java $(VENV)/.installed
	$(PY) -m binlake.runtime.spark  # resolves Delta's jars from Maven Central into .cache/ivy
	touch $@

# The classes a local JVM loads, archived once: every later local start maps them (~3 s less).
.cache/.class-archive: .cache/.delta-jars
	$(PY) -m binlake.runtime.spark --class-archive
	touch $@

# The oldest runtime binlake supports, as a job cluster has it (Databricks Runtime 17.3 LTS:
# Spark 4.0, Delta 4.0): the tests run the wheel on it too. Its Delta jars go to their own cache.
LTS_RUNTIME := pyspark==4.0.1 delta-spark==4.0.1 py4j==0.10.9.9
.cache/lts-runtime/.installed: $(VENV)/.installed
	rm -rf .cache/lts-runtime
	$(PY) -m pip install -q --no-deps --target .cache/lts-runtime $(LTS_RUNTIME)
	PYTHONPATH=.cache/lts-runtime $(PY) -m binlake.runtime.spark
	touch $@

db-up: /usr/sbin/mariadbd ## Start the project's MariaDB (127.0.0.1:13306, data in .db/)
	scripts/db.sh up

db-down: ## Stop the project's MariaDB
	scripts/db.sh down

lint: $(VENV)/.installed ## ruff check, ruff format --check, mypy on src/
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy src

unit: $(VENV)/.installed ## Unit tests only (no database, no Spark)
	$(VENV)/bin/pytest -q tests/unit

test: setup lint db-up ## Lint, unit and integration tests against the real MariaDB, binlog and Delta
	$(DB_ENV) && $(VENV)/bin/pytest -q -p no:cacheprovider --durations=30 -m "not soak" tests

run: setup db-up ## Demo: load the shop, run the bundle's catch-up job locally, change rows, catch up again, print what landed
	rm -rf lakehouse
	$(DB_ENV) && scripts/db.sh sql < fixtures/shop.sql
	$(DB_ENV) && $(VENV)/bin/binlake bundle run-local silver_catchup --target local \
		--var 'silver_history_tables={customers: scd2}'
	$(DB_ENV) && scripts/db.sh sql < fixtures/shop_changes.sql
	$(DB_ENV) && $(VENV)/bin/binlake stream --available-now --config fixtures/demo.yml
	$(DB_ENV) && $(VENV)/bin/binlake status --config fixtures/demo.yml
	$(DB_ENV) && $(VENV)/bin/binlake verify --config fixtures/demo.yml

bench: setup db-up ## Throughput benchmark (BENCH_ROWS rows, default 1,000,000)
	$(DB_ENV) && $(PY) -m bench.run

soak: setup db-up ## The longer crash variants (pytest -m soak), then a 10-minute stream under sustained writes (SOAK_S, SOAK_RATE)
	$(DB_ENV) && $(VENV)/bin/pytest -q -p no:cacheprovider -m soak tests
	$(DB_ENV) && $(PY) -m bench.soak

clean: ## Remove the lakehouse and caches (keeps the venv and the database)
	rm -rf lakehouse .pytest_cache .mypy_cache .ruff_cache
