"""Judging, above the metrics: the results model (``results.py``), the verdict path
(``judgement.py``: each step returns a new frozen ``Verdict``), the gate that the plugin and
``torchbench compare`` share (``gate.py``), accepting an intended change (``accept.py``), the
history of a baseline set (``history.py``); the child runs that explain or confirm a failure
are the pytest glue's (``pytest/children.py``). Metrics are reached only through
``metrics.registry``; nothing here imports pytest or starts a process."""
