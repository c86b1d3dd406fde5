# `make run`: install, then start web + worker (+ an embedded Redis unless one is available).
# `make test`: install, then the whole test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
# LiteLLM's proxy, which the benchmark compares with, in a virtualenv of its own.
LITELLM_VENV ?= .venv-litellm
# A native build of llama.cpp crashes on CPUs that advertise AMX; build portably.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: install run test clean

install: $(VENV)/.installed $(LITELLM_VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-bench.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
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

test: install
	$(PY) -m pytest

clean:
	rm -rf $(VENV) $(LITELLM_VENV)
