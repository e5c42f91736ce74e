"""The bench: ``textagent bench`` (``textagent.bench.cli.main``), the task suite (``suite.jsonl``)
or BFCL run in several modes side by side against a real model, with a report (``episode``,
``runner``, ``progress``, ``tasks``, ``tools``, ``metrics``, ``report``). The sweeps of the parser,
the loop and llama-server's settings are not in the package: ``benchmarks/`` of a checkout.
"""
