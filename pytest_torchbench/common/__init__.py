"""The bottom layer: the words every layer shares (verdict statuses, ``Verdict``, ``Policy``,
``Environment``), text escaping and number formatting, statistics, and every private torch and
pytest API the package uses (``compat``). Imports nothing of the package outside this folder."""
