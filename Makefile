# `make run`: install, then start web + worker (+ an embedded Redis unless one is available).
# `make test`: install, then the whole test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
# A native build of llama.cpp crashes on CPUs that advertise AMX; build portably.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: install run test clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $@

run: install
	$(PY) scripts/run.py

test: install
	$(PY) -m pytest

clean:
	rm -rf $(VENV)
