"""Benchmarks.

- ``textagent bench`` (``textagent.bench.cli.main``): the task suite (``suite.jsonl``) run in
  several modes side by side against a real model, with a report (``episode``, ``runner``, ``progress``,
  ``tasks``, ``tools``, ``metrics``, ``report``).
- ``python -m textagent.bench.parse_speed``: parser speed; ``python -m textagent.bench.loop``: the
  agent loop's own overhead per step.
"""
