"""The doctor's probes: one module per concern, each a function returning its
``ptkit.doctor.model`` record.

Every probe reads files and metadata (and, for ``--build``, runs commands with
timeouts); none imports torch. ``ptkit.doctor.collect`` runs them isolated: a probe that
raises or hangs becomes a line in ``Facts.probe_problems``. Standard library (and
``packaging``) only, valid on CPython 3.10.
"""
