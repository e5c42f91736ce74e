from benchmarks import loop


def test_loop_bench_runs_the_scripted_scenario():
    samples = loop.measure(3, 2, trace=True, tool_timeout=5)
    assert len(samples) == 2 and all(s > 0 for s in samples)
