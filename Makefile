# ptkit's two everyday commands:
#   make demo   build the cpu wheel, install it into a fresh venv, show it working
#   make test   build the cpu and cu13 wheels, install the cpu one, run the test suite
PY        := .venv/bin/python
VARIANT   ?= cpu
DIST      := dist/$(VARIANT)
# The variant's pip toolkit, if its recipe pins one (scripts/bootstrap installs it).
CUDA_ROOT  = $(lastword $(wildcard $(CURDIR)/.toolchains/$(VARIANT)/lib/python*/site-packages/nvidia/cu*))

.PHONY: venv wheel install demo test lint bench clean

venv:
	@scripts/bootstrap

# Built into a scratch folder and moved into dist/ only when complete.
wheel: venv
	@rm -rf build/wheel-tmp && mkdir -p build/wheel-tmp $(DIST)
	PTKIT_VARIANT=$(VARIANT) PTKIT_CUDA_ROOT=$(CUDA_ROOT) $(PY) -m pip wheel --no-build-isolation --no-deps -q -C build-dir=build/cmake-$(VARIANT) -w build/wheel-tmp . 2>&1 | grep -v '^WARNING: Location' || true
	@test -n "$$(ls build/wheel-tmp/ptkit-*.whl 2>/dev/null)" || { echo "make wheel: no wheel was built (see the output above)"; exit 1; }
	@rm -f $(DIST)/ptkit-*.whl && mv build/wheel-tmp/ptkit-*.whl $(DIST)/ && ls $(DIST)/ptkit-*.whl

install: wheel
	$(PY) -m pip install -q --no-deps --force-reinstall $(DIST)/ptkit-*.whl 2>&1 | grep -v '^WARNING: Location' || true

demo: wheel
	@scripts/demo $(DIST)/ptkit-*.whl

# The cpu wheel is installed into .venv; the cu13 wheel (CUDA 13.5 from PyPI, all
# targets) is built too and tested in its own venvs.
test: install
	$(MAKE) --no-print-directory wheel VARIANT=cu13
	PTKIT_TEST_WHEEL=$$(ls dist/cpu/ptkit-*.whl) PTKIT_TEST_CU13_WHEEL=$$(ls dist/cu13/ptkit-*.whl) \
		$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

bench: install
	cd build && ../$(PY) ../benchmarks/bench_cpu.py --out ../benchmarks/results

clean:
	rm -rf build dist
