"""The package index: one PEP 503/691/658 index per accelerator variant, and a server.

``build_index`` (``ptkit index build``) writes ``<out>/<variant>/simple/``, each with the
variant's wheels and the universal ones (the toolkit ``ptkit``); ``IndexServer`` (``ptkit
index serve``) serves it with PEP 691 content negotiation. Installers use one variant's
index: ``pip install ptkit-ops --index-url <root>/cu13/simple`` gets ``ptkit-ops`` +cu13
and the ``ptkit`` it depends on from that page.
"""

from __future__ import annotations

from ptkit.index.builder import VariantIndex, build_index
from ptkit.index.server import IndexServer, negotiate, running_server
from ptkit.index.wheels import IndexBuildError, IndexedWheel, inspect_wheel

__all__ = [
    "IndexBuildError",
    "IndexServer",
    "IndexedWheel",
    "VariantIndex",
    "build_index",
    "inspect_wheel",
    "negotiate",
    "running_server",
]
