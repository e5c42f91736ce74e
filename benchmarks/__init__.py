"""Sweeps and measurements of textagent, run from a source checkout (not shipped in the wheel):

- ``python -m benchmarks.parse_speed``: the reply parser's speed (typical replies, 1 MB of mixed
  text, adversarial inputs);
- ``python -m benchmarks.loop``: the agent loop's own overhead per step, with no model;
- ``python -m benchmarks.server_settings``: llama-server throughput per setting (threads, poll,
  slots, cache reuse), its figures and table in ``server_figures``;
- ``python -m benchmarks.speculative``: speculative decoding on real first replies.

Their figures are in docs/perf.md; their tests in tests/benchmarks/.
"""
