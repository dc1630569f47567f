"""Graceful degradation, decided without torch: whether ``torch.compile`` works here
(``compile_rules``), which distributed backend to try first (``distributed_choice``) and
which Inductor GEMM backends are worth enabling (``gemm_choice``). ``ptkit.runtime``
acts on these choices; ``ptkit doctor`` reports them.
"""
