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
