# HAL — `make run` serves the console, `make test` runs every test (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements.lock | sha1sum | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000
export DJANGO_SETTINGS_MODULE := hal.settings

.PHONY: run test test-suite lint format venv wheelhouse chromium system-deps claude-code migrate clean lock vendor

# requirements.lock pins every dependency (dev tools too) to the versions CI last passed
# with; `make lock` re-resolves pyproject.toml in a scratch venv and rewrites it.
$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

# The dependencies as wheels (deploy/wheelhouse.py), kept beside the venv: the deploy tests
# build their release wheelhouses from it offline (--no-index --find-links), as a build
# machine builds one from the package index. It holds what the venv's Python needs and what
# the first patch version of its minor needs (X.Y.0: every `python_full_version < "X.Y.n"`
# marker true, e.g. redis's async-timeout), so a test can build for a host's older patch
# version (Debian 12's 3.11.2) offline (docs/adr/0018).
WHEELHOUSE := $(VENV)/wheelhouse
WHEEL_STAMP := $(WHEELHOUSE)/.built-$(shell cat pyproject.toml requirements.lock deploy/wheelhouse.py | sha1sum | cut -c1-12)
$(WHEEL_STAMP): $(STAMP)
	@rm -rf $(WHEELHOUSE)
	$(BIN)/python deploy/wheelhouse.py $(WHEELHOUSE) \
	  --host-python $$($(BIN)/python -c 'import platform; print(platform.python_version())') \
	  --host-python $$($(BIN)/python -c 'import sys; print("%d.%d.0" % sys.version_info[:2])')
	@touch $@

venv: $(STAMP)

# Only the tests need it (`make run` does not build wheels).
wheelhouse: $(WHEEL_STAMP)

# System packages the tests drive, installed when missing (root or sudo), in one apt call:
# chromium + a Korean font for the browser tests (screenshots of the Korean UI show text,
# not boxes); openssh-server, nginx and caddy for the deploy tests (ship over SSH, TLS proxy);
# systemd and dbus for the deploy tests under a real systemd; prometheus-alertmanager for the
# alert receivers' tests (a real Alertmanager delivering to HAL).
SYSTEM_DEPS := chromium:/usr/bin/chromium fonts-nanum:fonts-nanum openssh-server:/usr/sbin/sshd \
  nginx:/usr/sbin/nginx caddy:/usr/bin/caddy systemd:/lib/systemd/systemd dbus:/usr/bin/dbus-daemon \
  prometheus-alertmanager:/usr/bin/prometheus-alertmanager prometheus:/usr/bin/prometheus
system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do pkg=$${dep%%:*}; path=$${dep#*:}; \
	  case $$path in /*) [ -x "$$path" ] || missing="$$missing $$pkg";; \
	    *) fc-list :lang=ko 2>/dev/null | grep -q . || missing="$$missing $$pkg";; esac; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages for the tests:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The real Claude Code CLI for the local-CLI tests, pinned in deploy/claude-code.version
# (docs/providers.md: how to update), installed into .tools/ (git-ignored) from npm;
# Debian's nodejs/npm are installed first when npm is missing.
CLAUDE_CODE_VERSION := $(shell cat deploy/claude-code.version)
CLAUDE_CODE := .tools/claude-code/node_modules/.bin/claude
claude-code:
	@if [ "$$($(CLAUDE_CODE) --version 2>/dev/null | cut -d' ' -f1)" != "$(CLAUDE_CODE_VERSION)" ]; then \
	  if ! command -v npm >/dev/null; then \
	    echo "Installing Debian nodejs and npm for the Claude Code CLI tests"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; \
	  fi; \
	  npm install --prefix .tools/claude-code --no-save --no-audit --no-fund --loglevel=error \
	    @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION); \
	fi

chromium: system-deps

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

test: venv wheelhouse system-deps claude-code test-suite

# The suite on two workers per core (pytest-xdist; a test file stays on one worker, so its
# module fixtures are built once; the order is tests/ordering.py's: the files that take
# minutes first, the browser files as one block). Two per core because the suite waits half
# its time — on daphne, chromium, installs and sockets: one worker per core kept a 2-core
# machine at ~50 % CPU (CI's first pass: 15.5 CPU-minutes in 15.8 minutes, 2026-12-06).
# `make test-suite TEST_WORKERS=0` runs it in one process. The slowest tests are printed at
# the end (CI's log is where the next cut of its time starts).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
test-suite:
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

lint: venv
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

lock:
	@rm -rf .lock-venv && $(PY) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q --upgrade pip
	.lock-venv/bin/python -m pip install -q -e '.[dev]'
	@{ echo "# Pinned by \`make lock\` on $$(date -u +%F) (Python $$(.lock-venv/bin/python -c 'import platform; print(platform.python_version())')); constraints for pip -c."; \
	  .lock-venv/bin/python -m pip freeze --exclude-editable; } > requirements.lock
	@rm -rf .lock-venv
	@echo "requirements.lock rewritten; run make test before committing it"

# Front-end libraries (markdown-it, DOMPurify, highlight.js, axe-core) are committed under
# static/vendor/; this re-fetches them from the npm registry and checks every sha256 pin.
vendor: venv
	$(BIN)/python scripts/vendor.py

clean:
	rm -rf $(VENV) staticfiles test-artifacts
