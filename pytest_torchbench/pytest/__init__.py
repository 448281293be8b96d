"""The pytest glue: options, the marker, fixtures, hooks, seeding, the measuring session, the
controller, xdist workers and the extension hooks. ``plugin.py`` is the ``pytest11`` entry point
(plugin name ``torchbench``). The top layer: nothing below imports it.

A subpackage named ``pytest`` is safe: imports are absolute, so ``import pytest`` in these modules
is pytest itself; this file imports nothing.
"""
