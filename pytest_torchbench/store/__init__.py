"""Baseline sets on disk (``storage.py``: atomic writes, the schema) and in git revisions
(``refs.py``: resolving ``--bench-compare``). Above the results model, below the reports.
"""
