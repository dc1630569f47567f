"""``ptkit doctor``: probes of the environment and checks with fixes.

Not built yet: the doctor is a later issue. ``ptkit explain`` (``ptkit.runtime.explain()``)
already reports what runs where and why.
"""
