"""Speed benchmarks (not part of the test suite). Run ``python -m benchmarks [--filter TEXT] [--repeat N]``."""
