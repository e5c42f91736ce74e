"""Benchmarks: ``python -m textagent.bench.parser``."""
