# HAL — `make run` serves the console, `make test` runs every test (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000
export DJANGO_SETTINGS_MODULE := hal.settings

.PHONY: run test test-suite lint format venv chromium migrate clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

# Browser tests drive Debian's chromium; install it when it is missing (root or sudo).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "Installing Debian chromium for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

migrate: venv
	$(BIN)/python manage.py migrate --noinput

# The embedded console: SQLite (WAL), in-memory channel layer, one daphne, one worker,
# and a node agent for this machine so the fleet has a real server with live metrics.
run: migrate
	$(BIN)/python manage.py hal_bootstrap
	$(BIN)/python manage.py chat_recover
	@echo "HAL is starting on http://$(HOST):$(PORT)/  (Ctrl-C stops everything)"
	@trap 'kill 0' INT TERM EXIT; \
	  $(BIN)/python manage.py hal_worker & \
	  $(BIN)/python manage.py hal_local_agent --hal http://$(HOST):$(PORT) & \
	  $(BIN)/daphne -b $(HOST) -p $(PORT) hal.asgi:application

test: venv chromium test-suite

test-suite:
	$(BIN)/pytest -q

lint: venv
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) staticfiles test-artifacts
