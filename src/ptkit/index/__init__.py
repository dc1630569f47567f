"""The package index writer and server (one PEP 503/691 index per accelerator).

Not built yet: the index is a later issue. The recipes already carry each variant's
``index-path``.
"""
