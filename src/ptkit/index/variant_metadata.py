"""WheelNext / PEP 825 variant metadata for a variant's index page (optional).

PEP 825 ("Wheel Variants: Package Format", status: **Draft**, created 2026-02) extends
the wheel file name with a *variant label*
(``ptkit_ops-0.1.0+cu13-py3-none-manylinux_2_28_x86_64-cu13.whl``) and puts a
``*.dist-info/variant.json`` inside the wheel mapping that label to *variant
properties*, ``namespace :: feature :: value`` strings such as
``nvidia :: sm_arch :: 90_real``. The index serves a ``{name}-{version}-variants.json``
file beside the wheels listing every label of that version. A variant-aware installer
(WheelNext's uv/pip builds) runs the *provider plugin* each namespace names
(``nvidia-variant-provider`` …) to learn what the machine supports, keeps the variants
whose every feature has at least one supported value, and prefers them to the plain
wheel. Installers that do not know PEP 825 ignore variant wheels (the label makes the
name invalid for them). The format is a draft: ``variantlib`` 0.2.2 (WheelNext's
reference library, schema ``v0.2.0``) is the implementation we write and validate
against, and the files below will change when the PEP does.

What ptkit writes, for ``ptkit index build --variant-metadata`` (once per variant):

- a copy of each wheel with ``variant.json`` added to its dist-info (and to RECORD),
  named with the variant label: the recipe's name (``cu13``, ``rocm7.14``, ``xpu``;
  PEP 825 labels are ``[0-9a-z_.]{1,16}``);
- one ``{name}-{version}-variants.json`` per version among those wheels;
- nothing for a variant without properties (``cpu``, ``metal``): see below.
- nothing for a universal wheel on the page (the toolkit ``ptkit-0.1.0-py3-none-any.whl``,
  which has no variant): ``ptkit index build`` passes only the variant's own wheels.

Properties (``variant_properties``), in the namespaces and feature names of WheelNext's
provider plugins, so variant-aware installers understand them:

- ``cuda`` → ``nvidia :: cuda_version_lower_bound :: <toolkit major>`` (the wheel runs
  on any driver of the toolkit's major, CUDA minor-version compatibility; only the PTX
  JIT needs the toolkit's minor, which ``ptkit.runtime`` checks at load time) and one
  ``nvidia :: sm_arch`` per required target: SASS ``sm_XY`` → ``XY_real``, PTX
  ``compute_XY`` → ``XY_virtual`` (the plugin's CMake-style values; it has no notion
  of the ``a``/``f`` suffixes, so those map to ``XY_real`` too). No upper bound: newer
  drivers run older runtimes.
- ``hip`` → ``amd :: gfx_arch :: gfxNNNN`` per required target; feature qualifiers
  (``:xnack+``) are dropped and a generic target (``gfx11-generic``) becomes every
  processor of its family, since the plugin reports the device's own processor. No
  ``amd :: rocm_version``: the plugin reports one exact ROCm version, and torch's ROCm
  wheels bring their own runtime, so a pin would only exclude working machines.
- ``xpu`` → ``intel :: device_ip :: <GMDID>`` per ahead-of-time device (``pvc`` →
  ``12.60.7``, ``bmg`` → ``20.1.0`` …, the values ``ocloc ids`` prints). ``spir64`` (the
  JIT fallback) adds none: no property can say "any Intel GPU", and the plain wheel,
  identical, serves those.
- ``cpu`` and ``metal`` → no properties, and no files. Their wheel would be the *null
  variant* (label ``null``, always compatible), which says nothing the plain wheel on
  the same page does not; and variantlib 0.2.2 cannot even read back a metadata file
  whose only variant is the null one (``default-priorities.namespace`` must list at
  least one namespace, and a null variant uses none). There is no WheelNext provider
  namespace for Apple GPUs, and the ``macosx_arm64`` platform tag already means "has MPS".

Optional targets (``cuda-optional``, ``hip-optional``) are left out: the build may drop
them, and a property must not promise code the wheel may lack.

Validation (``variantlib``, no provider plugin installed): every property is parsed by
``VariantProperty.from_str`` and the label checked by ``VariantDescription``; each value
is checked with ``variantlib.api.validate_variant`` against the providers' value
catalogues given as static properties (one property at a time, because variantlib
0.2.2 treats every static feature as single-valued, and ``sm_arch`` is multi-valued:
that rule is checked here from the same table); the written ``variant.json`` is read
back with ``VariantDistInfo`` (label from the file name), the ``variants.json`` with
``VariantsJson``, and the RECORD hash of ``variant.json`` is checked. Any failure raises
``VariantMetadataError`` with variantlib's message.

Why the per-accelerator indexes stay the primary install path (docs/architecture.md):
PEP 825 is a draft, pip and uv releases do not implement it, its provider plugins are
pre-1.0 and run code at install time, and a wheel variant only works where the
installer has the plugin. ``pip install --index-url <root>/cu13/simple ptkit-ops`` works
today everywhere. So the variant files are an addition to a variant's page, never a
replacement: the plain wheel stays linked beside them, and it is also what a
variant-aware installer falls back to when the machine supports no listed property.

Output is deterministic: entries keep their input order, timestamps and attributes;
``variant.json`` takes RECORD's timestamp (or ``SOURCE_DATE_EPOCH`` when set); the JSON
is variantlib's own serialisation (sorted keys). The same inputs give the same bytes.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import json
import os
import re
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ptkit.backends import BACKENDS, TargetError
from ptkit.backends.hip import HipBackend
from ptkit.backends.xpu import DEVICE_IPS
from ptkit.recipes.model import Recipe

__all__ = [
    "PROVIDERS",
    "VARIANTLIB_REQUIREMENT",
    "ProviderSpec",
    "VariantMetadataError",
    "variant_label",
    "variant_properties",
    "write_variant_files",
]

VARIANTLIB_REQUIREMENT = "variantlib==0.2.2"
_COMMAND = "ptkit index build --variant-metadata"
_NULL_LABEL = "null"
_LABEL = re.compile(r"^[0-9a-z_.]{1,16}$")
# Wheel file name (no variant label), as variantlib and the wheel spec read it.
_WHEEL_NAME = re.compile(
    r"^(?P<namever>(?P<name>[^\s-]+?)-(?P<ver>[^\s-]+?))(-(?P<build>\d[^-]*))?"
    r"-(?P<pyver>[^\s-]+?)-(?P<abi>[^\s-]+?)-(?P<plat>[^\s-]+?)\.whl$"
)


class VariantMetadataError(ValueError):
    """Variant metadata cannot be written or does not validate; the message says why and the fix."""


@dataclasses.dataclass(frozen=True)
class ProviderSpec:
    """A WheelNext variant provider: how installers get its plugin, and the values it knows."""

    requires: tuple[str, ...]
    """pip requirements of the plugin (``providers.<ns>.requires`` in the metadata)."""
    plugin_api: str
    """``module:Class`` of the plugin."""
    features: dict[str, tuple[tuple[str, ...], bool]]
    """feature -> (every value the plugin accepts, whether a wheel may list several)."""


def _nvidia_cuda_versions() -> tuple[str, ...]:
    # The plugin's catalogue: majors 15..11, each with minors 20..0 and the bare major.
    return tuple(
        value
        for major in range(15, 10, -1)
        for value in (*(f"{major}.{minor}" for minor in range(20, -1, -1)), str(major))
    )


def _nvidia_sm_values() -> tuple[str, ...]:
    # The plugin's catalogue: compute capabilities 5.0..12.9, real (SASS) and virtual (PTX).
    pairs = [(major, minor) for major in range(12, 4, -1) for minor in range(9, -1, -1)]
    return tuple(f"{major}{minor}_{kind}" for kind in ("real", "virtual") for major, minor in pairs)


PROVIDERS: dict[str, ProviderSpec] = {
    "nvidia": ProviderSpec(
        requires=("nvidia-variant-provider>=0.0.1,<1.0.0",),
        plugin_api="nvidia_variant_provider.plugin:NvidiaVariantPlugin",
        features={
            "cuda_version_lower_bound": (_nvidia_cuda_versions(), False),
            "sm_arch": (_nvidia_sm_values(), True),
        },
    ),
    "amd": ProviderSpec(
        requires=("amd-variant-provider>=0.0.1,<1.0.0",),
        plugin_api="amd_variant_provider.plugin:AMDVariantPlugin",
        features={"gfx_arch": (HipBackend.processors, True)},
    ),
    "intel": ProviderSpec(
        requires=("intel-variant-provider>=0.0.1,<1.0.0",),
        plugin_api="intel_variant_provider.plugin:IntelVariantPlugin",
        features={"device_ip": (tuple(sorted(set(DEVICE_IPS.values()))), True)},
    ),
}


def _fail(problem: str, fix: str) -> VariantMetadataError:
    return VariantMetadataError(f"{_COMMAND}: {problem}; {fix}")


def _recipe_file(recipe: Recipe) -> str:
    return f"recipes/{recipe.name}.toml"


# The variantlib modules used below (imported by name: variantlib ships no type
# information, and every use goes through ModuleType attributes).
_VARIANTLIB_MODULES = (
    "variantlib",
    "variantlib.api",
    "variantlib.constants",
    "variantlib.errors",
    "variantlib.models.variant_info",
    "variantlib.variant_dist_info",
    "variantlib.variants_json",
)


def _variantlib() -> ModuleType:
    """variantlib, imported on first use: ``ptkit index build`` without the flag needs none."""
    try:
        for name in _VARIANTLIB_MODULES:
            importlib.import_module(name)
    except ImportError as exc:
        raise _fail(
            f"writing PEP 825 variant metadata needs the variantlib package, which is not "
            f"installed here ({exc})",
            f"install it with `pip install {VARIANTLIB_REQUIREMENT}`, or build the index "
            "without --variant-metadata",
        ) from exc
    variantlib = importlib.import_module("variantlib")
    version = str(getattr(variantlib, "__version__", "unknown"))
    if not version.startswith("0.2."):
        raise _fail(
            f"expected variantlib 0.2.x (variant metadata schema v0.2.0), found variantlib {version}",
            f"install the tested version with `pip install {VARIANTLIB_REQUIREMENT}`",
        )
    return variantlib


def variant_label(recipe: Recipe) -> str:
    """The variant label of the recipe's wheels: its name; ``null`` (the null variant,
    for which no files are written) when it has no properties."""
    if not variant_properties(recipe):
        return _NULL_LABEL
    if not _LABEL.match(recipe.name) or recipe.name == _NULL_LABEL:
        raise _fail(
            f"{_recipe_file(recipe)}: the variant name {recipe.name!r} cannot be a PEP 825 "
            "variant label (expected 1-16 characters of 0-9, a-z, '_' and '.', not 'null')",
            "rename the variant",
        )
    return recipe.name


def variant_properties(recipe: Recipe) -> list[str]:
    """The PEP 825 properties of the recipe's wheels, sorted, each ``ns :: feature :: value``
    (the backend's ``variant_properties``). Empty (the null variant) for ``cpu`` and
    ``metal``; see the module docstring."""
    backend = BACKENDS[recipe.backend]
    targets = getattr(recipe.targets, backend.target_field) if backend.target_field else ()
    try:
        return sorted(set(backend.variant_properties(targets, recipe.toolkit.version)))
    except TargetError as exc:
        raise _fail(f"{_recipe_file(recipe)}: {exc}", "fix the recipe") from exc


# --- validation --------------------------------------------------------------------


def _description(vl: ModuleType, properties: list[str], label: str) -> Any:
    """A ``VariantDescription``, each property and the label checked by variantlib."""
    errors = vl.errors
    parsed = []
    for text in properties:
        try:
            parsed.append(vl.api.VariantProperty.from_str(text))
        except errors.ValidationError as exc:
            raise _fail(
                f"variantlib rejects the variant property {text!r}: {exc}",
                "fix the property (namespace and feature [a-z0-9_], value [a-z0-9_.])",
            ) from exc
    try:
        return vl.api.VariantDescription(parsed, label=label)
    except errors.ValidationError as exc:
        raise _fail(f"variantlib rejects the variant {label!r}: {exc}", "fix the variant") from exc


def _check_values(vl: ModuleType, vdesc: Any, variant: str) -> None:
    """Every value one its provider accepts, several values only where the feature allows."""
    info_cls = vl.models.variant_info
    values: dict[tuple[str, str], list[str]] = {}
    for vprop in vdesc.properties:
        spec = PROVIDERS.get(vprop.namespace)
        if spec is None or vprop.feature not in spec.features:
            known = ", ".join(f"{ns} :: {f}" for ns, s in PROVIDERS.items() for f in s.features)
            raise _fail(
                f"variant {variant!r}: {vprop.to_str()!r} uses a feature no provider ptkit "
                f"knows defines (known: {known})",
                "use a feature of a WheelNext provider, or add its provider to PROVIDERS",
            )
        catalogue = info_cls.VariantInfo(
            namespace_priorities=[vprop.namespace],
            providers={
                vprop.namespace: info_cls.ProviderInfo(
                    static_properties={
                        name: list(allowed) for name, (allowed, _multi) in spec.features.items()
                    }
                )
            },
        )
        single = vl.api.VariantDescription([vprop])
        result = vl.api.validate_variant(single, variant_info=catalogue)
        if not result.is_valid(allow_unknown_plugins=False):
            raise _fail(
                f"variant {variant!r}: variantlib validation failed: {vprop.to_str()!r} is not "
                f"a value the {vprop.namespace} provider accepts ("
                f"invalid: {[p.to_str() for p in result.invalid_properties]}, "
                f"unknown: {[p.to_str() for p in result.unknown_properties]})",
                "fix the recipe's targets or toolkit version",
            )
        values.setdefault((vprop.namespace, vprop.feature), []).append(vprop.value)
    for (namespace, feature), listed in values.items():
        if len(listed) > 1 and not PROVIDERS[namespace].features[feature][1]:
            raise _fail(
                f"variant {variant!r}: '{namespace} :: {feature}' takes one value, got {listed}",
                "list one value",
            )


def _variant_info(vl: ModuleType, vdesc: Any) -> Any:
    """The shared part of variant.json / variants.json: priorities and providers."""
    info_cls = vl.models.variant_info
    namespaces = sorted({vprop.namespace for vprop in vdesc.properties})
    return info_cls.VariantInfo(
        namespace_priorities=namespaces,
        providers={
            ns: info_cls.ProviderInfo(
                requires=list(PROVIDERS[ns].requires), plugin_api=PROVIDERS[ns].plugin_api
            )
            for ns in namespaces
        },
    )


# --- the variant wheel -------------------------------------------------------------


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode('ascii')}"


def _timestamp(
    fallback: tuple[int, int, int, int, int, int],
) -> tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        return fallback
    if not epoch.isdigit():
        raise _fail(
            f"SOURCE_DATE_EPOCH must be a number of seconds, got {epoch!r}",
            "set it to an integer (git log -1 --format=%ct) or unset it",
        )
    # Zip times start in 1980.
    t = time.gmtime(max(int(epoch), 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def _copy_info(info: zipfile.ZipInfo, name: str | None = None) -> zipfile.ZipInfo:
    out = zipfile.ZipInfo(name or info.filename, date_time=info.date_time)
    out.compress_type = info.compress_type
    out.external_attr = info.external_attr
    out.create_system = info.create_system
    return out


def _dist_info_dir(wheel: Path, names: list[str]) -> str:
    dirs = sorted({n.split("/", 1)[0] for n in names if re.match(r"^[^/]+\.dist-info/RECORD$", n)})
    if len(dirs) != 1:
        raise _fail(
            f"{wheel.name}: expected one top-level *.dist-info/RECORD, found {dirs or 'none'}",
            "pass wheels built by `ptkit build`",
        )
    return dirs[0]


def _write_variant_wheel(
    wheel: Path, out_dir: Path, label: str, variant_json: str, stem: str
) -> Path:
    target = out_dir / f"{stem}-{label}.whl"
    data = variant_json.encode("utf-8")
    with zipfile.ZipFile(wheel) as source:
        infos = source.infolist()
        names = [i.filename for i in infos]
        dist_info = _dist_info_dir(wheel, names)
        variant_path = f"{dist_info}/variant.json"
        record_path = f"{dist_info}/RECORD"
        if variant_path in names:
            raise _fail(
                f"{wheel.name} already contains {variant_path} but has no variant label",
                "pass the plain wheels from dist/<variant>/",
            )
        partial = out_dir / f".{target.name}.partial"
        try:
            with zipfile.ZipFile(partial, "w") as dest:
                for info in infos:
                    content = source.read(info)
                    if info.filename == record_path:
                        added = _copy_info(info, variant_path)
                        added.date_time = _timestamp(info.date_time)
                        dest.writestr(added, data)
                        text = content.decode("utf-8")
                        newline = "\r\n" if text.endswith("\r\n") else "\n"
                        if text and not text.endswith(newline):
                            text += newline
                        text += f"{variant_path},{_record_hash(data)},{len(data)}{newline}"
                        content = text.encode("utf-8")
                    dest.writestr(_copy_info(info), content)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
    return target


def _verify_wheel(vl: ModuleType, path: Path, label: str, vdesc: Any) -> None:
    """Read the written wheel back with variantlib, as an installer would."""
    match = vl.constants.VALIDATION_WHEEL_NAME_REGEX.fullmatch(path.name)
    if match is None or match.group("variant_label") != label:
        raise _fail(
            f"variantlib does not read {path.name} as a variant wheel with label {label!r}",
            "report this as a ptkit bug",
        )
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        dist_info = _dist_info_dir(path, names)
        data = archive.read(f"{dist_info}/variant.json")
        record = archive.read(f"{dist_info}/RECORD").decode("utf-8")
    try:
        parsed = vl.variant_dist_info.VariantDistInfo(data, expected_label=label)
    except vl.errors.ValidationError as exc:
        raise _fail(
            f"{path.name}: variantlib rejects its variant.json: {exc}", "report this as a ptkit bug"
        ) from exc
    if parsed.variant_desc != vdesc:
        raise _fail(
            f"{path.name}: variant.json does not hold the expected properties",
            "report this as a ptkit bug",
        )
    line = f"{dist_info}/variant.json,{_record_hash(data)},{len(data)}"
    if line not in record.splitlines():
        raise _fail(f"{path.name}: RECORD lacks {line!r}", "report this as a ptkit bug")


def write_variant_files(wheels: Sequence[Path], recipe: Recipe, out_dir: Path) -> list[Path]:
    """Write the variant wheels and ``{name}-{version}-variants.json`` files of ``wheels``.

    ``wheels`` are the plain wheels of ``recipe``'s variant (never modified); the files
    go to ``out_dir`` only. Returns the variant wheels in input order, then the
    ``variants.json`` files sorted by name: each one to link on the variant's page.
    Returns ``[]`` and writes nothing for a variant without properties (``cpu``,
    ``metal``). Everything is validated with variantlib before returning;
    ``VariantMetadataError`` otherwise."""
    vl = _variantlib()
    if not variant_properties(recipe):
        return []

    label = variant_label(recipe)
    vdesc = _description(vl, variant_properties(recipe), label)
    _check_values(vl, vdesc, recipe.name)
    info = _variant_info(vl, vdesc)
    try:
        variant_json = vl.api.make_variant_dist_info(vdesc, variant_info=info)
    except vl.errors.ValidationError as exc:
        raise _fail(f"variantlib cannot write variant.json: {exc}", "fix the recipe") from exc

    seen: dict[str, Path] = {}
    plan: list[tuple[Path, str, str]] = []
    for wheel in wheels:
        match = _WHEEL_NAME.match(wheel.name)
        if match is None or not wheel.is_file():
            raise _fail(
                f"{wheel} is not a wheel file (name-version-python-abi-platform.whl)",
                "pass the wheels from dist/<variant>/",
            )
        if wheel.name in seen:
            raise _fail(
                f"{wheel.name} is given twice ({seen[wheel.name]}, {wheel})", "pass it once"
            )
        seen[wheel.name] = wheel
        plan.append((wheel, wheel.name[: -len(".whl")], match.group("namever")))

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    by_version: dict[str, Any] = {}
    for wheel, stem, namever in plan:
        path = _write_variant_wheel(wheel, out_dir, label, variant_json, stem)
        _verify_wheel(vl, path, label, vdesc)
        written.append(path)
        dist_info = vl.variant_dist_info.VariantDistInfo(variant_json, expected_label=label)
        if namever in by_version:
            by_version[namever].merge(dist_info)
        else:
            by_version[namever] = vl.variants_json.VariantsJson(dist_info)
            by_version[namever].variants = dict(dist_info.variants)

    indexes: list[Path] = []
    for namever in sorted(by_version):
        text = str(by_version[namever].to_str())
        try:
            reread = vl.variants_json.VariantsJson(json.loads(text))
        except vl.errors.ValidationError as exc:
            raise _fail(
                f"variantlib rejects {namever}-variants.json: {exc}", "report this as a ptkit bug"
            ) from exc
        if reread.variants != {label: vdesc}:
            raise _fail(
                f"{namever}-variants.json does not list exactly the label {label!r}",
                "report this as a ptkit bug",
            )
        path = out_dir / f"{namever}-variants.json"
        partial = out_dir / f".{path.name}.partial"
        partial.write_bytes(text.encode("utf-8"))
        partial.replace(path)
        indexes.append(path)
    return written + indexes
