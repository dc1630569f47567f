# ptkit's two everyday commands:
#   make demo   build the toolkit and the cpu wheel of ptkit-ops, install them into a fresh venv,
#               show them working, and say what to do next
#   make test   scripts/test: set-up (scripts/bootstrap), unit tests from the source tree, the
#               toolkit and the cpu, cu13 and rocm7.14 wheels of ptkit-ops, the cpu one installed
#               into .venv, the integration tests, then a summary (wheels, tags, sizes, counts)
# Every target first runs scripts/bootstrap for what it needs (seconds once it is all there).
PY        := .venv/bin/python
VARIANT   ?= cpu
DIST      := dist/$(VARIANT)
TOOLKIT   := dist/toolkit
# The tests run in TEST_WORKERS pytest-xdist processes, one test file per process at a time
# (its module fixtures, the projects it builds, are made once): most tests wait on one
# single-threaded child (pip, a torch import, qemu), so two halve the time on two cores.
# Files go out in collection order (tests/integration/conftest.py puts the longest first),
# not xdist's default of the most tests first, which left the one-test emulated builds last.
TEST_WORKERS ?= 2
XDIST     := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# The integration run names each test as it starts and its time when it took a second or
# more (tests/conftest.py), then the slowest twenty.
INTEGRATION_ARGS ?= -v --durations=20

.PHONY: venv toolkit wheel install demo test unit integration lint bench gemv-shapes clean

# .venv alone (what the cpu variant, the unit tests and the linters need).
venv:
	@scripts/bootstrap --variant cpu

# The toolkit: a pure-Python py3-none-any wheel, built from toolkit/pyproject.toml.
toolkit: venv
	@rm -rf $(TOOLKIT) && $(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(TOOLKIT) toolkit/
	@ls $(TOOLKIT)/ptkit-*.whl

# `ptkit build` from the source tree: built in a scratch folder, moved into dist/<variant>/
# only when complete, with the build report (what each backend did).
wheel:
	@scripts/bootstrap --variant $(VARIANT)
	PYTHONPATH=src $(PY) -m ptkit build --variant $(VARIANT)

# This machine's wheels only: dist/<variant>/ also keeps the wheels `ptkit build --platform`
# cross-builds for macOS and Windows.
NATIVE = ptkit_ops-*linux*.whl

install: toolkit wheel
	$(PY) -m pip install -q --no-deps --force-reinstall $(TOOLKIT)/ptkit-*.whl $(DIST)/$(NATIVE) 2>&1 | grep -v '^WARNING: Location' || true

demo: toolkit wheel
	@scripts/demo $(TOOLKIT)/ptkit-*.whl $(DIST)/$(NATIVE)

# Unit tests run from the source tree: no wheel, seconds.
unit: venv
	$(PY) -m pytest tests/unit $(XDIST) $(PYTEST_ARGS)

# See scripts/test: each phase with its time, and the summary at the end (also when a
# phase fails). The cpu wheel is installed into .venv; the cu13 wheel (CUDA 13.5 from
# PyPI, all targets) and the rocm7.14 wheel (Debian's hipcc, gfx90a) are built too and
# tested in their own venvs.
test:
	@scripts/test

# The integration tests against the wheels in dist/ (make test builds them first).
integration: venv
	PTKIT_TEST_TOOLKIT_WHEEL=$$(ls $(TOOLKIT)/ptkit-*.whl) PTKIT_TEST_WHEEL=$$(ls dist/cpu/$(NATIVE)) \
		PTKIT_TEST_CU13_WHEEL=$$(ls dist/cu13/$(NATIVE)) \
		PTKIT_TEST_ROCM_WHEEL=$$(ls dist/rocm7.14/$(NATIVE)) \
		$(PY) -m pytest tests/integration tests/device $(XDIST) $(INTEGRATION_ARGS) $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

bench: install
	cd build && ../$(PY) ../benchmarks/bench_cpu.py --out ../benchmarks/results
	$(PY) benchmarks/bench_doctor.py --out benchmarks/results

# The bf16 decode GEMV's launch-shape sweep (benchmarks/cuda_gemv_shapes.cu), built here with
# the cu13 recipe's nvcc for sm_90; scripts/device-check runs it on the GPU machine.
GEMV_SHAPES ?= build/cuda_gemv_shapes
gemv-shapes:
	@scripts/bootstrap --variant cu13
	@mkdir -p $(dir $(GEMV_SHAPES))
	$$(ls .toolchains/cu13/lib/python*/site-packages/nvidia/cu*/bin/nvcc | tail -n 1) -std=c++17 -O3 \
		-arch=sm_90 -Icuda/include -Igpu/include -Icpp/include -o $(GEMV_SHAPES) benchmarks/cuda_gemv_shapes.cu

clean:
	rm -rf build dist
