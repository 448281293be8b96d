"""The core: the shared vocabulary and the results model, the judgement and the gate.

Two layers live here. ``vocabulary.py`` and ``text.py`` are the lowest layer of the package (verdict
statuses, ``Verdict``, ``Policy``, ``Environment``, rounding, escaping): engines and metrics import them.
``results.py``, ``judgement.py``, ``gate.py`` and ``explain.py`` sit above the metrics, which they reach
only through ``metrics.registry``. This file imports nothing, so that importing the vocabulary never
imports the results model (tests/test_layering.py checks the order).
"""
