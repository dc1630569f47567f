"""Reading a ``.metal`` source: each kernel's buffer arguments, compared by the unit tests
with ptkit-ops' Python binding (``ptkit_ops._metal.KERNELS``), so the two cannot drift."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from ptkit_ops._metal import DTYPE_SUFFIX, KERNELS, ArgKind, MetalArg, host_name

# The element type each host-name suffix stands for (the suffix is the Metal type name).
_SUFFIX_TYPES = {suffix: suffix for suffix in DTYPE_SUFFIX.values()}

# Reading the .metal source ---------------------------------------------------------


class MetalSourceError(ValueError):
    """A kernel declaration in the .metal source that the binding cannot describe."""


@dataclasses.dataclass(frozen=True)
class _Param:
    name: str
    kind: ArgKind
    element_type: str | None  # the T of a `device T*`


@dataclasses.dataclass(frozen=True)
class _KernelDecl:
    function: str  # the template's name
    host_name: str | None  # None: the template definition
    template_args: str | None  # "half" in rms_norm<half>
    params: tuple[_Param, ...]

    @property
    def args(self) -> tuple[MetalArg, ...]:
        return tuple(MetalArg(p.name, p.kind) for p in self.params)


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_KERNEL_HEAD = re.compile(
    r"template\s*"
    r"(?:<[^<>]*>|\[\[\s*host_name\s*\(\s*\"(?P<host>[^\"]*)\"\s*\)\s*\]\])\s*"
    r"(?:\[\[\s*kernel\s*\]\]|kernel)\s+void\s+(?P<function>\w+)\s*"
    r"(?:<(?P<targs>[^<>]*)>)?\s*\("
)
_HOST_NAME = re.compile(r"host_name\s*\(")
_ATTRIBUTE = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)
_BUFFER_INDEX = re.compile(r"^\s*buffer\s*\(\s*(\d+)\s*\)\s*$")
_DEVICE_POINTER = re.compile(
    r"^device\s+(?:const\s+)?(?P<type>\w+)\s*(?:const\s*)?\*\s*(?:const\s+)?(?P<name>\w+)$"
)
_CONSTANT_REF = re.compile(r"^constant\s+(?:const\s+)?(?P<type>\w+)\s*&\s*(?P<name>\w+)$")
_SCALAR_KINDS: dict[str, ArgKind] = {"float": "float", "long": "int", "int64_t": "int"}


def _split_params(text: str) -> list[str]:
    params, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif ch == "," and depth == 0:
            params.append(text[start:i])
            start = i + 1
    params.append(text[start:])
    return [p.strip() for p in params if p.strip()]


def _closing_paren(text: str, open_index: int) -> int:
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise MetalSourceError("unbalanced parentheses in a kernel's parameter list")


def _parse_params(where: str, text: str) -> tuple[_Param, ...]:
    params: list[_Param] = []
    for raw in _split_params(text):
        attributes = _ATTRIBUTE.findall(raw)
        declaration = " ".join(_ATTRIBUTE.sub(" ", raw).split())
        buffer_index = None
        for attribute in attributes:
            found = _BUFFER_INDEX.match(attribute)
            if found:
                buffer_index = int(found.group(1))
        if attributes and buffer_index is None:
            continue  # a built-in input such as [[thread_position_in_grid]], not a buffer
        position = len(params)
        if buffer_index is not None and buffer_index != position:
            raise MetalSourceError(
                f"{where}: parameter {declaration!r} is [[buffer({buffer_index})]] but is "
                f"buffer argument {position}: torch binds arguments by position"
            )
        pointer = _DEVICE_POINTER.match(declaration)
        if pointer:
            params.append(_Param(pointer.group("name"), "tensor", pointer.group("type")))
            continue
        scalar = _CONSTANT_REF.match(declaration)
        if scalar and scalar.group("type") in _SCALAR_KINDS:
            kind = _SCALAR_KINDS[scalar.group("type")]
            params.append(_Param(scalar.group("name"), kind, None))
            continue
        raise MetalSourceError(
            f"{where}: parameter {declaration!r} is none of `device T*`, `constant float&`, "
            "`constant long&` (what torch can bind: a tensor, a Python float, a Python int)"
        )
    return tuple(params)


def _parse_declarations(source: str) -> list[_KernelDecl]:
    text = _COMMENTS.sub(" ", source)
    declarations = []
    for head in _KERNEL_HEAD.finditer(text):
        close = _closing_paren(text, head.end() - 1)
        host = head.group("host")
        where = host if host is not None else f"template kernel {head.group('function')}"
        declarations.append(
            _KernelDecl(
                function=head.group("function"),
                host_name=host,
                template_args=(head.group("targs") or "").strip() or None,
                params=_parse_params(where, text[head.end() : close]),
            )
        )
    named = sum(1 for d in declarations if d.host_name is not None)
    mentioned = len(_HOST_NAME.findall(text))
    if mentioned != named:
        raise MetalSourceError(
            f"{mentioned} host_name attributes but {named} parsed kernel instantiations: "
            'write each as `template [[host_name("...")]] kernel void f<T>(...);`'
        )
    return declarations


def parse_metal_kernels(source: str) -> dict[str, tuple[MetalArg, ...]]:
    """The exported kernels of a ``.metal`` source: host name -> buffer arguments in
    buffer order (parameters with built-in attributes such as
    ``[[thread_position_in_grid]]`` are not buffers and are left out).

    Raises MetalSourceError for a parameter torch cannot bind, a ``[[buffer(i)]]``
    that is not the parameter's position, or a host name declared twice.
    """
    kernels: dict[str, tuple[MetalArg, ...]] = {}
    for decl in _parse_declarations(source):
        if decl.host_name is None:
            continue
        if decl.host_name in kernels:
            raise MetalSourceError(f"{decl.host_name} is declared twice")
        kernels[decl.host_name] = decl.args
    return kernels


def _describe(args: Sequence[MetalArg]) -> str:
    return "(" + ", ".join(map(str, args)) + ")"


def metal_signature_problems(
    source: str, kernels: dict[str, tuple[MetalArg, ...]] | None = None
) -> list[str]:
    """What disagrees between a ``.metal`` source and the binding's ``kernels`` table
    (default ``KERNELS``); empty when they agree.

    Checks every ``ptkit_<kernel>_<suffix>`` exists, instantiates ``<kernel><T>`` with
    the suffix's type, has exactly the table's buffer arguments (names and kinds, in
    order) and ``device T*`` pointers of that type; that each template definition
    has the same arguments; and that the source exports nothing else.
    """
    table = KERNELS if kernels is None else kernels
    try:
        declarations = _parse_declarations(source)
    except MetalSourceError as exc:
        return [str(exc)]
    problems: list[str] = []
    instances: dict[str, _KernelDecl] = {}
    templates: dict[str, _KernelDecl] = {}
    for decl in declarations:
        if decl.host_name is None:
            templates.setdefault(decl.function, decl)
        elif decl.host_name in instances:
            problems.append(f"{decl.host_name} is declared twice")
        else:
            instances[decl.host_name] = decl

    expected: set[str] = set()
    for kernel, args in table.items():
        template = templates.get(kernel)
        if template is None:
            problems.append(f"no template definition `kernel void {kernel}(...)`")
        elif template.args != args:
            problems.append(
                f"template {kernel}: the .metal declares {_describe(template.args)}, "
                f"the binding passes {_describe(args)}"
            )
        for dtype, suffix in DTYPE_SUFFIX.items():
            name = host_name(kernel, dtype)
            expected.add(name)
            instance = instances.get(name)
            if instance is None:
                problems.append(f"{name} is missing (the binding launches it for {dtype})")
                continue
            element = _SUFFIX_TYPES[suffix]
            if instance.function != kernel or instance.template_args != element:
                problems.append(
                    f"{name} instantiates {instance.function}<{instance.template_args}>, "
                    f"expected {kernel}<{element}>"
                )
            if instance.args != args:
                problems.append(
                    f"{name}: the .metal declares {_describe(instance.args)}, "
                    f"the binding passes {_describe(args)}"
                )
            for param in instance.params:
                if param.kind == "tensor" and param.element_type != element:
                    problems.append(
                        f"{name}: buffer {param.name} is a `device {param.element_type}*`, "
                        f"expected `device {element}*`"
                    )
    for name in sorted(set(instances) - expected):
        problems.append(f"{name} is exported by the .metal source but unknown to the binding")
    return problems
