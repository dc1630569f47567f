"""The smoke stage's report of a child killed by a signal (``ptkit.release.pipeline.smoke``):
which signal, from the process or from the shell that ran it, and which library the
loader's trace (``PTKIT_LOAD_TRACE=1``) was loading. The real crash is
tests/integration/test_shapes_cpp_schemas.py's."""

from __future__ import annotations

from ptkit.release.pipeline.smoke import _crash_site, _signal_of


def test_a_signal_is_read_from_the_process_or_from_the_shell() -> None:
    assert _signal_of(-11) == "SIGSEGV (signal 11)"
    assert _signal_of(139) == "SIGSEGV (exit status 139: signal 11)"
    assert _signal_of(134) == "SIGABRT (exit status 134: signal 6)"
    assert _signal_of(1) is None
    assert _signal_of(0) is None
    assert _signal_of(128) is None
    assert _signal_of(255) is None  # 127 is no signal Python names


def test_the_library_being_loaded_is_named_from_the_loaders_trace() -> None:
    trace = "ptkit: loading /v/x/_native/liba.so\nptkit: loaded /v/x/_native/liba.so\n"
    assert _crash_site(trace + "ptkit: loading /v/x/_native/libb.so\nFatal Python error") == (
        "while loading /v/x/_native/libb.so (the loader's last line: ptkit: loading "
        "/v/x/_native/libb.so)"
    )
    assert _crash_site(trace) == (
        "after the loader was done with /v/x/_native/liba.so (not while loading a library)"
    )
    failed = "ptkit: loading /v/libc.so\nptkit: loading /v/libc.so failed: undefined symbol\n"
    assert _crash_site(failed).startswith("after the loader was done with /v/libc.so")
    assert _crash_site("Fatal Python error: Segmentation fault") == (
        "before ptkit's loader loaded any library (at import, or in the test itself)"
    )
