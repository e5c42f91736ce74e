"""The backend wrapper that keeps every completion."""

from __future__ import annotations

from textagent.backends.scripted import ScriptedBackend
from textagent.bench.recording import Recording


def test_every_completion_is_kept_in_order_and_the_rest_passes_through():
    backend = ScriptedBackend(["Thinking.\nOBSERVATION: made up", "ANSWER: 4"])
    recording = Recording(backend)
    first = recording.complete("p", stop=["\nOBSERVATION:"], max_tokens=10)
    second = recording.complete("p", stop=["\nOBSERVATION:"], max_tokens=10)
    assert recording.completions == [first, second]
    assert [c.stop_word for c in recording.completions] == ["\nOBSERVATION:", None]
    assert recording.capabilities is backend.capabilities
