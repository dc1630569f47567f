"""What an installed ptkit-ops records in the session, and how the entry points list it."""

from __future__ import annotations

import ptkit.runtime
import ptkit_ops
from ptkit.loading.packages import discover_packages, installed_packages


def test_installed_ptkit_ops_declares_itself() -> None:
    (entry,) = [e for e in discover_packages() if e.name == "ptkit_ops"]
    assert (entry.module, entry.distribution) == ("ptkit_ops", "ptkit-ops")
    assert entry.version == ptkit_ops.__version__
    assert installed_packages()["ptkit_ops"] == "ptkit_ops"
    # The toolkit ships no kernels: it is no package of the group.
    assert "ptkit" not in installed_packages()


def test_ptkit_ops_is_a_recorded_package() -> None:
    (own,) = [p for p in ptkit.runtime.package_loads() if p.name == "ptkit_ops"]
    assert ptkit.runtime.load_package("ptkit_ops") is own  # idempotent: the recorded result
    assert own.version == ptkit_ops.__version__
    assert own.native_dir.name == "_native"
    assert list(own.decisions) == ptkit.runtime.load_decisions("ptkit_ops")
    assert own.to_json()["name"] == "ptkit_ops"
    assert own.loaded("cpu") == any(
        d.backend == "cpu" and d.status.value == "loaded" for d in own.decisions
    )
