"""A small GBNF toolkit for tests: parse a grammar the way llama.cpp does, tell whether a string
is in its language, and draw random strings from it (with hypothesis, so failures shrink).

    g = Grammar.parse(text)          # GBNFError on anything llama.cpp would reject
    g.matches("TOOL: f ARGS: {}")    # -> bool
    g.sample(data.draw)              # a random string of the language (inside @given(st.data()))

Syntax rules follow llama.cpp's grammar parser (src/llama-grammar.cpp): rule names are words of
``[A-Za-z0-9-]``; a rule ends at a newline unless inside parentheses or right after ``|``;
escapes are ``\\x.. \\u.... \\U........ \\t \\r \\n \\\\ \\" \\[ \\]``; ``#`` starts a comment;
``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}`` repeat; ``.`` is any character.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

__all__ = ["GBNFError", "Grammar"]


class GBNFError(ValueError):
    pass


# AST nodes are tuples: ("alt", [seq, ...]), ("seq", [node, ...]), ("lit", text),
# ("cls", negated, ((lo, hi), ...)), ("ref", name), ("rep", node, lo, hi_or_None), ("any",)

_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX = {"x": 2, "u": 4, "U": 8}


def _word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def error(self, what: str) -> GBNFError:
        line = self.s.count("\n", 0, self.i) + 1
        return GBNFError(f"{what} at line {line}: {self.s[self.i : self.i + 40]!r}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def space(self, newline_ok: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] not in "\r\n":
                    self.i += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                self.i += 1
            else:
                break

    def name(self) -> str:
        start = self.i
        while self.i < len(self.s) and _word(self.s[self.i]):
            self.i += 1
        if self.i == start:
            raise self.error("expecting name")
        return self.s[start : self.i]

    def int(self) -> int:
        start = self.i
        while self.peek().isdigit() and self.peek().isascii():
            self.i += 1
        if self.i == start:
            raise self.error("expecting integer")
        return int(self.s[start : self.i])

    def char(self) -> str:
        c = self.peek()
        if c == "":
            raise self.error("unexpected end of input")
        if c != "\\":
            self.i += 1
            return c
        e = self.peek(1)
        if e in _HEX:
            n = _HEX[e]
            digits = self.s[self.i + 2 : self.i + 2 + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"expecting {n} hex chars")
            self.i += 2 + n
            code = int(digits, 16)
            if code > sys.maxunicode:
                raise self.error("code point out of range")
            return chr(code)
        if e in _ESCAPES:
            self.i += 2
            return _ESCAPES[e]
        raise self.error("unknown escape")

    def grammar(self) -> dict[str, Any]:
        rules: dict[str, Any] = {}
        self.space(True)
        while self.i < len(self.s):
            name = self.name()
            self.space(False)
            if not self.s.startswith("::=", self.i):
                raise self.error("expecting ::=")
            self.i += 3
            self.space(True)
            body = self.alternates(nested=False)
            if name in rules:
                raise self.error(f"rule {name} defined twice")
            rules[name] = body
            if self.peek() == "\r":
                self.i += 1
            if self.peek() == "\n":
                self.i += 1
            elif self.peek():
                raise self.error("expecting newline or end")
            self.space(True)
        return rules

    def alternates(self, nested: bool) -> Any:
        seqs = [self.sequence(nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            seqs.append(self.sequence(nested))
        return seqs[0] if len(seqs) == 1 else ("alt", seqs)

    def sequence(self, nested: bool) -> Any:  # noqa: C901
        items: list[Any] = []
        while True:
            c = self.peek()
            if c == '"':
                self.i += 1
                text = []
                while self.peek() != '"':
                    text.append(self.char())
                self.i += 1
                items.append(("lit", "".join(text)))
            elif c == "[":
                self.i += 1
                negated = self.peek() == "^"
                if negated:
                    self.i += 1
                ranges = []
                while self.peek() != "]":
                    lo = self.char()
                    hi = lo
                    if self.peek() == "-" and self.peek(1) not in ("]", ""):
                        self.i += 1
                        hi = self.char()
                    ranges.append((ord(lo), ord(hi)))
                self.i += 1
                items.append(("cls", negated, tuple(ranges)))
            elif _word(c):
                items.append(("ref", self.name()))
            elif c == "(":
                self.i += 1
                self.space(True)
                inner = self.alternates(nested=True)
                if self.peek() != ")":
                    raise self.error("expecting )")
                self.i += 1
                items.append(inner)
            elif c == ".":
                self.i += 1
                items.append(("any",))
            elif c and c in "*+?":
                if not items:
                    raise self.error("expecting preceding item")
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                items[-1] = ("rep", items[-1], lo, hi)
            elif c == "{":
                if not items:
                    raise self.error("expecting preceding item")
                self.i += 1
                self.space(nested)
                lo = self.int()
                self.space(nested)
                hi: int | None = lo
                if self.peek() == ",":
                    self.i += 1
                    self.space(nested)
                    hi = self.int() if self.peek().isdigit() else None
                    self.space(nested)
                if self.peek() != "}":
                    raise self.error("expecting }")
                self.i += 1
                if hi is not None and hi < lo:
                    raise self.error("bad repetition bounds")
                items[-1] = ("rep", items[-1], lo, hi)
            else:
                break
            self.space(nested)
        return items[0] if len(items) == 1 else ("seq", items)


def _refs(node: Any, out: set[str]) -> None:
    kind = node[0]
    if kind == "ref":
        out.add(node[1])
    elif kind in ("alt", "seq"):
        for child in node[1]:
            _refs(child, out)
    elif kind == "rep":
        _refs(node[1], out)


def _in_class(node: Any, code: int) -> bool:
    inside = any(lo <= code <= hi for lo, hi in node[2])
    return inside != node[1]


# Characters tried first when drawing from a negated class: the ones that break things.
_TRICKY = "\"\\{}[]:, \t\r\x00\x1f\x7f\x85\xa0\u2028\u3000é€😀aZ09-+.eE'`*#>TOOLANSWEROBSERVATION"


@dataclass
class Grammar:
    rules: dict[str, Any]

    @classmethod
    def parse(cls, text: str) -> Grammar:
        rules = _Parser(text).grammar()
        if "root" not in rules:
            raise GBNFError("grammar has no root rule")
        used: set[str] = set()
        for body in rules.values():
            _refs(body, used)
        missing = used - set(rules)
        if missing:
            raise GBNFError(f"undefined rules: {', '.join(sorted(missing))}")
        return cls(rules)

    # -- recognising --------------------------------------------------------------------------
    def matches(self, text: str, rule: str = "root") -> bool:  # noqa: C901
        memo: dict[tuple[str, int], frozenset[int]] = {}
        active: set[tuple[str, int]] = set()

        def ends(node: Any, pos: int) -> frozenset[int]:
            kind = node[0]
            if kind == "lit":
                return frozenset([pos + len(node[1])]) if text.startswith(node[1], pos) else frozenset()
            if kind == "cls":
                return frozenset([pos + 1]) if pos < len(text) and _in_class(node, ord(text[pos])) else frozenset()
            if kind == "any":
                return frozenset([pos + 1]) if pos < len(text) else frozenset()
            if kind == "ref":
                key = (node[1], pos)
                if key not in memo:
                    if key in active:
                        raise GBNFError(f"left recursion through {node[1]}")
                    active.add(key)
                    memo[key] = ends(self.rules[node[1]], pos)
                    active.discard(key)
                return memo[key]
            if kind == "alt":
                out: set[int] = set()
                for seq in node[1]:
                    out |= ends(seq, pos)
                return frozenset(out)
            if kind == "seq":
                current = {pos}
                for item in node[1]:
                    current = {e for p in current for e in ends(item, p)}
                    if not current:
                        break
                return frozenset(current)
            # rep: past `lo` repetitions the count no longer matters, so each end is expanded once
            _, item, lo, hi = node
            result = {pos} if lo == 0 else set()
            frontier, count = {pos}, 0
            while frontier and (hi is None or count < hi):
                count += 1
                nxt = {e for p in frontier for e in ends(item, p)}
                if count < lo:
                    frontier = nxt
                elif hi is None:
                    frontier = nxt - result
                    result |= nxt
                else:
                    frontier = nxt
                    result |= nxt
            return frozenset(result)

        return len(text) in ends(("ref", rule), 0)

    # -- sampling -----------------------------------------------------------------------------
    def _min_depth(self) -> dict[str, float]:
        depth = {name: float("inf") for name in self.rules}

        def d(node: Any) -> float:
            kind = node[0]
            if kind in ("lit", "cls", "any"):
                return 0
            if kind == "ref":
                return depth[node[1]] + 1
            if kind == "alt":
                return min(d(s) for s in node[1])
            if kind == "seq":
                return max((d(s) for s in node[1]), default=0)
            return 0 if node[2] == 0 else d(node[1])

        changed = True
        while changed:
            changed = False
            for name, body in self.rules.items():
                v = d(body)
                if v < depth[name]:
                    depth[name], changed = v, True
        self._d = d
        return depth

    def sample(
        self, draw: Callable[[Any], Any], rule: str = "root", *, max_depth: int = 12, max_repeat: int = 4
    ) -> str:
        """A random string of the language; past ``max_depth`` rule expansions deep, the
        shallowest ways out are taken so that recursive grammars end."""
        self._min_depth()
        d = self._d
        out: list[str] = []

        def gen(node: Any, depth: int) -> None:
            kind = node[0]
            if kind == "lit":
                out.append(node[1])
            elif kind == "cls":
                out.append(draw_char(node))
            elif kind == "any":
                out.append(draw(st.characters(exclude_characters="\n")))
            elif kind == "ref":
                gen(self.rules[node[1]], depth + 1)
            elif kind == "alt":
                options = node[1]
                if depth > max_depth:
                    best = min(d(s) for s in options)
                    options = [s for s in options if d(s) == best]
                gen(options[draw(st.integers(0, len(options) - 1))], depth)
            elif kind == "seq":
                for item in node[1]:
                    gen(item, depth)
            else:
                _, item, lo, hi = node
                top = lo if depth > max_depth else (lo + max_repeat if hi is None else min(hi, lo + max_repeat))
                for _ in range(draw(st.integers(lo, top))):
                    gen(item, depth)

        def draw_char(node: Any) -> str:
            if not node[1]:
                lo, hi = node[2][draw(st.integers(0, len(node[2]) - 1))]
                return chr(draw(st.integers(lo, hi)))
            tricky = [c for c in _TRICKY if _in_class(node, ord(c))]
            pool = st.sampled_from(tricky) | st.characters() if tricky else st.characters()
            return draw(pool.filter(lambda c: _in_class(node, ord(c))))

        gen(("ref", rule), 0)
        return "".join(out)
