"""Reports: how a run's results and verdicts are shown (terminal, JSON; more formats build on
these)."""
