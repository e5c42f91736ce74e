"""``bfcl-prompt``: the leaderboard's own Prompt mode, as the external baseline.

BFCL's default system prompt (``DEFAULT_SYSTEM_PROMPT_FORMAT`` =
``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic``:
the functions as indented JSON, the answer a Python list ``[f(a=1), g(b="x")]``), the reply
decoded as BFCL decodes it (``ast`` of the list, keyword arguments only), **no retries**: a reply
that does not decode is taken as a reply without calls, as BFCL scores it.

On a multi-step task the loop (the Agent's, as for every mode) goes on the way BFCL's multi-turn
prompting does: the decoded calls run, their results come back as one user turn (as the Qwen
handler's chat template writes ``tool`` messages: ``<tool_response>`` blocks), and a reply with
no call (or one that does not decode) ends the turn.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import resources
from string import Template
from typing import Any

from ... import prompts as _prompts
from ...backends.base import Completion
from ...modes import Conversation, ModeContext, Needs, fixed_part
from ...modes.base import complete
from ...protocol import Reply, ToolCall
from ...steps import Step
from ...tools import ToolOutcome

__all__ = ["BfclPromptMode", "DecodeError", "decode", "held_out_message", "system_prompt", "tool_responses"]


class DecodeError(ValueError):
    """The reply is not a Python list of calls (BFCL: the item scores as unparseable)."""


def system_prompt(functions: Sequence[Mapping[str, Any]]) -> str:
    text = resources.files(__package__).joinpath("prompt_system.txt").read_text(encoding="utf-8")
    return Template(text).substitute(functions=json.dumps(list(functions), indent=4))


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
}


#: The most bits of an integer an argument's arithmetic may make: 2**14284 < 10**4300, Python's
#: default limit on writing an int as text, past which the call could not be written as JSON.
MAX_INT_BITS = 14_284


def _too_big(op: ast.operator, left: Any, right: Any) -> bool:
    """The integer ``left op right`` would be past MAX_INT_BITS: known before it is computed, as
    ``((9**512)**512)**512`` would take hours and more memory than there is."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return False  # a float overflows to an error or inf at once
    if isinstance(op, ast.Pow):  # |left| ** right >= 2 ** ((bits of |left| - 1) * right)
        return right > 0 and (abs(left).bit_length() - 1) * right > MAX_INT_BITS
    if isinstance(op, ast.Mult):  # a product has at least the bits of its factors, less one
        return left.bit_length() + right.bit_length() - 1 > MAX_INT_BITS
    return False  # a sum, a difference, a quotient or a remainder: at most a bit more than its operands


def _arith(node: ast.AST) -> Any:
    """BFCL evaluates a binary operation in an argument (``2**10``); here only on numbers, never
    code, and with every integer it makes held within MAX_INT_BITS."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _arith(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _arith(node.left), _arith(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 512:
            raise DecodeError("exponent too large")
        if _too_big(node.op, left, right):
            raise DecodeError("number too large")
        try:
            value = _OPS[type(node.op)](left, right)
        except ArithmeticError as exc:  # 1/0, a float out of range: BFCL's eval fails there too
            raise DecodeError(f"cannot evaluate {ast.unparse(node)[:60]!r}: {exc}") from None
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise DecodeError("number too large")
        return value
    raise DecodeError(f"cannot evaluate {ast.unparse(node)!r}")


def _value(node: ast.AST) -> Any:
    """An argument's value the way BFCL's resolve_ast_by_type reads it."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        return _arith(node)
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        return {_value(k) if k is not None else None: _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp):
        return _arith(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else _call(node)
    if isinstance(node, (ast.Subscript, ast.Attribute, ast.Lambda)):
        return ast.unparse(node)
    raise DecodeError(f"unsupported value {type(node).__name__}")


def _name(func: ast.AST) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call) -> dict[str, Any]:
    return {_name(node.func): {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg is not None}}


def decode(text: str) -> list[tuple[str, dict[str, Any]]]:
    """BFCL's ``default_decode_ast_prompting``: strip backticks, newlines and spaces at the ends,
    add the brackets if missing, parse as Python, every element a call. Raises DecodeError."""
    body = text.strip("`\n ")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    body = body.strip().strip("'")
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise DecodeError(f"not a Python list of calls: {exc}") from None
    elements = [tree.body] if isinstance(tree.body, ast.Call) else getattr(tree.body, "elts", None)
    if elements is None:
        raise DecodeError("not a list of calls")
    calls = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise DecodeError(f"{ast.unparse(element)[:60]!r} is not a call")
        try:
            ((name, args),) = _call(element).items()
        except RecursionError:
            raise DecodeError("nested too deeply") from None
        calls.append((name, args))
    return calls


def tool_responses(outputs: Iterable[str]) -> str:
    """Tool results as Qwen2.5's chat template writes a run of ``tool`` messages (one user turn)."""
    return "\n".join(f"<tool_response>\n{output}\n</tool_response>" for output in outputs)


HELD_OUT = "{functions}\nI have updated some more functions you can choose from. What about now?"


def held_out_message(functions: Sequence[Mapping[str, Any]]) -> str:
    """BFCL's user turn for functions held out until then (``multi_turn_miss_func``), Prompt mode:
    ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING`` with the documents as Python writes the list."""
    return HELD_OUT.format(functions=list(functions))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class BfclPromptMode:
    """BFCL's Prompt mode as a mode of the one Agent loop: BFCL's system prompt with
    ``functions`` (BFCL's JSON documents) and the item's own system turn; the reply decoded as
    BFCL decodes it, never sent back. Steps record ``details["bfcl_decode"]``: "ok",
    "no_calls" or the decode error. Run it with ``baseline.AGENT_OPTIONS``."""

    name = "bfcl-prompt"
    needs = Needs()
    prompts = _prompts.for_family("text")  # unused: BFCL's prompt has no feedback to word

    def __init__(self, functions: Sequence[Mapping[str, Any]], system: str = ""):
        self.functions, self.system = list(functions), system
        self.conversation = Conversation()

    def setup(self, ctx: ModeContext) -> None:
        self.ctx = ctx

    def start(self, task: str, examples: Sequence[Any]) -> None:  # BFCL shows no worked examples
        text = system_prompt(self.functions) + (("\n\n" + self.system) if self.system else "")
        messages = [{"role": "system", "content": text}, {"role": "user", "content": task}]
        fmt = self.ctx.format
        self.conversation = Conversation(messages, fmt.render(messages), fixed_part(fmt, messages))

    def set_tools(self, tools: Any) -> None:
        self.ctx = replace(self.ctx, tools=tools)

    def follow(self, task: str, added: Sequence[Any]) -> None:
        """The next user turn of a multi-turn item, as BFCL sends it (held-out functions come
        in the turn's own text: :func:`held_out_message`)."""
        conv = self.conversation
        conv.prompt += self.ctx.format.follow_up(task)
        conv.messages.append({"role": "user", "content": task})

    def query(self, step: Step, max_tokens: int) -> Completion:
        conv = self.conversation
        messages = [dict(m) for m in conv.messages]
        # the same request as the text modes' (its fixed part restored alike), for the same footing
        return complete(
            self.ctx, conv, stop=self.ctx.format.stop, max_tokens=max_tokens, messages=messages, **self.ctx.options
        )

    def parse(self, completion: Completion, step: Step) -> Reply:
        try:
            decoded = decode(completion.text)
            step.extra["bfcl_decode"] = "ok" if decoded else "no_calls"
        except DecodeError as exc:
            decoded = []
            step.extra["bfcl_decode"] = str(exc)
        if not decoded:  # no call, or no decodable call: BFCL takes it as the turn's end
            return Reply(calls=[], answer=completion.text.strip(), thought="")
        return Reply(calls=[ToolCall(name, _jsonable(args)) for name, args in decoded], answer=None, thought="")

    def execute(self, step: Step, index: int, call: ToolCall, timeout: float | None) -> ToolOutcome:
        return self.ctx.tools.execute(call, timeout=timeout, limit=self.ctx.observation_limit)

    def observe(self, step: Step, notes: Sequence[Any]) -> None:
        """The results as one user turn, the way BFCL's Qwen handler sends them: its chat template
        writes consecutive ``tool`` messages into one user turn, each in ``<tool_response>`` tags."""
        self._append(step, tool_responses(o.output for o in step.outcomes))

    def reject(self, step: Step, feedback: str) -> None:  # never: every reply is calls or the answer
        self._append(step, None)

    def answer(self, step: Step) -> None:
        self._append(step, None)

    def _append(self, step: Step, user_text: str | None) -> None:
        conv = self.conversation
        conv.prompt += step.raw
        conv.messages.append({"role": "assistant", "content": step.raw})
        if user_text is not None:
            conv.prompt += self.ctx.format.follow_up(user_text)
            conv.messages.append({"role": "user", "content": user_text})
        step.observations = [user_text] if user_text is not None else []

    def transcript(self) -> str:
        return self.conversation.prompt
