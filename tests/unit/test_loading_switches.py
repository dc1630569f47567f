"""The runtime's environment switches: parsed once, unknown values reported, never raised."""

from __future__ import annotations

from ptkit.loading.switches import RuntimeSwitches


def test_switches_parse_comma_lists_and_report_unknown_values() -> None:
    s = RuntimeSwitches.from_environ(
        {"PTKIT_DISABLE_NATIVE": " CPU, cuda ,, nope", "PTKIT_FORCE_REFERENCE": "maybe"}
    )
    assert s.disabled_backends == {"cpu", "cuda"}
    assert not s.force_reference
    assert any("unknown backend 'nope'" in p for p in s.problems)
    assert any("PTKIT_FORCE_REFERENCE: expected 1 or 0, got 'maybe'" in p for p in s.problems)
    assert RuntimeSwitches.from_environ({"PTKIT_DISABLE_NATIVE": "all"}).disabled_backends >= {
        "cpu",
        "cuda",
        "hip",
    }
    assert RuntimeSwitches.from_environ({"PTKIT_FORCE_REFERENCE": "1"}).force_reference


def test_the_cpu_isa_cap_is_read_case_insensitively_and_an_unknown_one_reported() -> None:
    assert RuntimeSwitches.from_environ({"PTKIT_CPU_ISA": "X86-64-V3"}).cpu_isa_cap == "x86-64-v3"
    assert RuntimeSwitches.from_environ({"PTKIT_CPU_ISA": "default"}).cpu_isa_cap == "default"
    assert RuntimeSwitches.from_environ({}).cpu_isa_cap is None
    garbage = RuntimeSwitches.from_environ({"PTKIT_CPU_ISA": "garbage"})
    assert garbage.cpu_isa_cap is None
    assert garbage.problems == (
        "PTKIT_CPU_ISA: unknown level 'garbage' (expected one of amx-bf16, avx512-bf16, "
        "x86-64-v4, x86-64-v3, x86-64-v2, neon-bf16, default); ignored: the CPU kernels take "
        "the best level this CPU runs",
    )


def test_load_trace_is_off_unless_asked_and_a_bad_value_is_reported() -> None:
    assert not RuntimeSwitches.from_environ({}).load_trace
    assert RuntimeSwitches.from_environ({"PTKIT_LOAD_TRACE": "1"}).load_trace
    odd = RuntimeSwitches.from_environ({"PTKIT_LOAD_TRACE": "loud"})
    assert not odd.load_trace
    assert odd.problems == ("PTKIT_LOAD_TRACE: expected 1 or 0, got 'loud'; treated as 0",)


def test_each_switch_says_how_to_turn_native_code_back_on() -> None:
    forced = RuntimeSwitches.from_environ({"PTKIT_FORCE_REFERENCE": "1"})
    assert forced.enable_fix("cuda") == "unset PTKIT_FORCE_REFERENCE (or set it to 0)"
    disabled = RuntimeSwitches.from_environ({"PTKIT_DISABLE_NATIVE": "cpu"})
    assert disabled.enable_fix("cpu") == "take cpu out of PTKIT_DISABLE_NATIVE"
    assert disabled.enable_fix("cuda") is None
