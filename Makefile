# ptkit's two everyday commands:
#   make demo   build the toolkit and the cpu wheel of ptkit-ops, install them into a fresh venv, show them working
#   make test   unit tests from the source tree, then build the toolkit and the cpu, cu13 and
#               rocm7.14 wheels of ptkit-ops, install the cpu one, run the integration tests
PY        := .venv/bin/python
VARIANT   ?= cpu
DIST      := dist/$(VARIANT)
TOOLKIT   := dist/toolkit
# TheRock's ROCm 7.14 is not reachable here: Debian's hipcc (HIP 5.2) builds gfx90a.
HIP_TARGETS_HERE := gfx90a

.PHONY: venv toolkit wheel install demo test unit lint bench clean

venv:
	@scripts/bootstrap

# The toolkit: a pure-Python py3-none-any wheel, built from toolkit/pyproject.toml.
toolkit: venv
	@rm -rf $(TOOLKIT) && $(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(TOOLKIT) toolkit/
	@ls $(TOOLKIT)/ptkit-*.whl

# `ptkit build` from the source tree: built in a scratch folder, moved into dist/<variant>/
# only when complete, with the build report (what each backend did).
wheel: venv
	PYTHONPATH=src $(PY) -m ptkit build --variant $(VARIANT)

install: toolkit wheel
	$(PY) -m pip install -q --no-deps --force-reinstall $(TOOLKIT)/ptkit-*.whl $(DIST)/ptkit_ops-*.whl 2>&1 | grep -v '^WARNING: Location' || true

demo: toolkit wheel
	@scripts/demo $(TOOLKIT)/ptkit-*.whl $(DIST)/ptkit_ops-*.whl

# Unit tests run from the source tree: no wheel, seconds.
unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The cpu wheel is installed into .venv; the cu13 wheel (CUDA 13.5 from PyPI, all
# targets) and the rocm7.14 wheel (Debian's hipcc, gfx90a) are built too and tested in
# their own venvs.
test: unit install
	$(MAKE) --no-print-directory wheel VARIANT=cu13
	PTKIT_HIP_TARGETS=$(HIP_TARGETS_HERE) $(MAKE) --no-print-directory wheel VARIANT=rocm7.14
	PTKIT_TEST_TOOLKIT_WHEEL=$$(ls $(TOOLKIT)/ptkit-*.whl) PTKIT_TEST_WHEEL=$$(ls dist/cpu/ptkit_ops-*.whl) \
		PTKIT_TEST_CU13_WHEEL=$$(ls dist/cu13/ptkit_ops-*.whl) \
		PTKIT_TEST_ROCM_WHEEL=$$(ls dist/rocm7.14/ptkit_ops-*.whl) \
		$(PY) -m pytest tests/integration tests/device $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

bench: install
	cd build && ../$(PY) ../benchmarks/bench_cpu.py --out ../benchmarks/results
	$(PY) benchmarks/bench_doctor.py --out benchmarks/results

clean:
	rm -rf build dist
