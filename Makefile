# ptkit's two everyday commands:
#   make demo   build the cpu wheel, install it into a fresh venv, show it working
#   make test   build the cpu, cu13 and rocm7.14 wheels, install the cpu one, run the tests
PY        := .venv/bin/python
VARIANT   ?= cpu
DIST      := dist/$(VARIANT)
# TheRock's ROCm 7.14 is not reachable here: Debian's hipcc (HIP 5.2) builds gfx90a.
HIP_TARGETS_HERE := gfx90a

.PHONY: venv wheel install demo test lint bench clean

venv:
	@scripts/bootstrap

# `ptkit build` from the source tree: built in a scratch folder, moved into dist/<variant>/
# only when complete, with the build report (what each backend did).
wheel: venv
	PYTHONPATH=src $(PY) -m ptkit.cli build --variant $(VARIANT)

install: wheel
	$(PY) -m pip install -q --no-deps --force-reinstall $(DIST)/ptkit-*.whl 2>&1 | grep -v '^WARNING: Location' || true

demo: wheel
	@scripts/demo $(DIST)/ptkit-*.whl

# The cpu wheel is installed into .venv; the cu13 wheel (CUDA 13.5 from PyPI, all
# targets) and the rocm7.14 wheel (Debian's hipcc, gfx90a) are built too and tested in
# their own venvs.
test: install
	$(MAKE) --no-print-directory wheel VARIANT=cu13
	PTKIT_HIP_TARGETS=$(HIP_TARGETS_HERE) $(MAKE) --no-print-directory wheel VARIANT=rocm7.14
	PTKIT_TEST_WHEEL=$$(ls dist/cpu/ptkit-*.whl) PTKIT_TEST_CU13_WHEEL=$$(ls dist/cu13/ptkit-*.whl) \
		PTKIT_TEST_ROCM_WHEEL=$$(ls dist/rocm7.14/ptkit-*.whl) $(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

bench: install
	cd build && ../$(PY) ../benchmarks/bench_cpu.py --out ../benchmarks/results
	$(PY) benchmarks/bench_doctor.py --out benchmarks/results

clean:
	rm -rf build dist
