# ptkit's two everyday commands:
#   make demo   build the cpu wheel, install it into a fresh venv, show it working
#   make test   build the cpu wheel, install it, run the test suite against it
PY        := .venv/bin/python
VARIANT   ?= cpu
DIST      := dist/$(VARIANT)

.PHONY: venv wheel install demo test test-fast lint bench clean

venv:
	@scripts/bootstrap

# Built into a scratch folder and moved into dist/ only when complete.
wheel: venv
	@rm -rf build/wheel-tmp && mkdir -p build/wheel-tmp $(DIST)
	PTKIT_VARIANT=$(VARIANT) $(PY) -m pip wheel --no-build-isolation --no-deps -q -w build/wheel-tmp . 2>&1 | grep -v '^WARNING: Location' || true
	@test -n "$$(ls build/wheel-tmp/ptkit-*.whl 2>/dev/null)" || { echo "make wheel: no wheel was built (see the output above)"; exit 1; }
	@rm -f $(DIST)/ptkit-*.whl && mv build/wheel-tmp/ptkit-*.whl $(DIST)/ && ls $(DIST)/ptkit-*.whl

install: wheel
	$(PY) -m pip install -q --no-deps --force-reinstall $(DIST)/ptkit-*.whl 2>&1 | grep -v '^WARNING: Location' || true

demo: wheel
	@scripts/demo $(DIST)/ptkit-*.whl

test: install
	PTKIT_TEST_WHEEL=$$(ls $(DIST)/ptkit-*.whl) $(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

bench: install
	cd build && ../$(PY) ../benchmarks/bench_cpu.py --out ../benchmarks/results

clean:
	rm -rf build dist
