"""Judging thresholds a command shows as its default in ``--help`` and a domain package judges with: one home,
importable at ``--help`` time without importing any domain package (tests/unit/test_startup.py)."""

#: slow = below this fraction of the expectation (``health perf``, ``health burn-in``)
SLOW_FRACTION = 0.9
#: burn-in: slow also = more than this many scaled MADs below the round's median
MAD_K = 4.0
