"""The model-free check of a suite: each task's ``reference`` replies replayed through the loop."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import prompts
from ..backends.base import Capabilities, Completion, Usage
from ..errors import BackendError
from .episode import run_episode
from .records import Episode
from .tasks import Task

__all__ = ["ReferenceBackend", "check_suite"]


class ReferenceBackend:
    """Replays each task's ``reference`` replies: the model-free check that a suite's tasks are
    solvable and its checkers right (``textagent bench --check-suite``). It finds the task from
    the conversation (``messages``) and answers with the reply for the current step."""

    capabilities = Capabilities()  # text replies only: no grammar, no chat(), no streaming

    def __init__(self, tasks: Iterable[Task]):
        self.by_question = {prompts.task(t.question): t for t in tasks}

    def complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        messages = options.get("messages") or []
        at, task = None, None
        for i, message in enumerate(messages):
            if message.get("role") == "user" and message.get("content") in self.by_question:
                at, task = i, self.by_question[message["content"]]
        if task is None or at is None:
            raise BackendError("ReferenceBackend: no task of the suite in this conversation")
        step = sum(1 for m in messages[at + 1 :] if m.get("role") == "assistant")
        if step >= len(task.reference):
            raise BackendError(
                f"ReferenceBackend: task {task.id} has {len(task.reference)} reference replies; "
                f"step {step + 1} asked for another"
            )
        text = task.reference[step]
        return Completion(
            text,
            finish_reason="stop",
            usage=Usage(
                prompt_tokens=len(prompt) // 4,
                prompt_evaluated=len(prompt) // 4,
                prompt_cached=0,
                completion_tokens=len(text) // 4 + 1,
            ),
        )


def check_suite(tasks: Sequence[Task]) -> list[tuple[Task, Episode | None]]:
    """Replay every task's reference in text mode: (task, episode) pairs; episode None when the
    task has no reference."""
    backend = ReferenceBackend(tasks)
    return [(t, run_episode(t, "text", backend) if t.reference else None) for t in tasks]
