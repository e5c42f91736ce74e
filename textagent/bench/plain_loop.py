"""The plain loop the comparison modes share (``baseline``, ``bfcl-prompt``): ask, read, run, append.

No feedback, no nudges: a mode's ``read(step)`` looks at ``step.raw`` and returns what the reply
means, and the loop does the rest (limits, usage, the append-only transcript, the trace).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from ..steps import Result, Step
from ..backends.base import Usage
from ..errors import BackendError
from ..templates import ChatFormat, get_format
from ..trace import TraceWriter

__all__ = ["ANSWER", "UNUSABLE", "run_plain"]

ANSWER, UNUSABLE = "answer", "unusable"

#: ``read(step)`` returns ``(ANSWER, text)``, ``(UNUSABLE, None)`` (the run ends with
#: ``format_errors``), or ``(observation, None)``: the text the model gets back; it sets
#: ``step.reply`` and runs the calls itself.
Read = Callable[[Step], tuple[str, str | None]]


def run_plain(backend: Any, tools: Any, task: str, messages: list[dict[str, str]], read: Read, *,
              mode: str, chat_format: str | ChatFormat = "chatml", stop: Sequence[str] = (), max_steps: int = 8,
              max_seconds: float | None = None, reply_tokens: int = 256,
              trace: str | Path | IO[str] | None = None, **options: Any) -> Result:
    fmt = get_format(chat_format)
    messages = [dict(m) for m in messages]
    prompt = fmt.render(messages)
    steps: list[Step] = []
    usage = Usage()
    started = time.monotonic()
    answer, reason, error = None, "max_steps", None
    with TraceWriter(trace) as writer:
        writer.start(task=task, tools=list(tools), max_steps=max_steps, chat_format=fmt.name, mode=mode)
        try:
            while True:
                if max_seconds is not None and time.monotonic() - started >= max_seconds:
                    reason = "time_limit"
                    break
                if len(steps) >= max_steps:
                    reason = "max_steps"
                    break
                completion = backend.complete(prompt, stop=[*stop, *fmt.stop], max_tokens=reply_tokens,
                                              messages=[dict(m) for m in messages], **options)
                usage += completion.usage
                step = Step(len(steps) + 1, completion.text, usage=completion.usage,
                            timings=dict(completion.timings), finish_reason=completion.finish_reason,
                            retries=completion.retries)
                steps.append(step)
                meaning, text = read(step)
                if meaning in (ANSWER, UNUSABLE):
                    writer.step(step)
                    answer, reason = (text, "answer") if meaning == ANSWER else (None, "format_errors")
                    break
                step.observations = [meaning]
                prompt += step.raw + fmt.follow_up(meaning)
                messages += [{"role": "assistant", "content": step.raw}, {"role": "user", "content": meaning}]
                writer.step(step)
        except BackendError as exc:
            reason, error = "backend_error", exc
        result = Result(answer, reason, steps, usage, time.monotonic() - started, error, prompt, mode=mode)
        writer.result(result)
    return result
