"""The package's shape: the loop stays small, modes never reach into the Agent, protocol/ is the
ground floor, no import cycles (imports inside functions count: they run too; so do modules named
in strings for importlib, as the CLI's dispatch table names its subcommands)."""

import ast
import pathlib
import re

import textagent

PACKAGE = pathlib.Path(textagent.__file__).resolve().parent


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_MODULE = re.compile(r"textagent(?:\.[a-z_][a-z0-9_]*)+")


def _imports(path: pathlib.Path, *, typing: bool = True) -> set[str]:
    """Modules of the package that ``path`` imports, at the top or inside a function; with
    ``typing``, also those imported for type checkers only (``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not typing and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom):
                base = package[: len(package) - child.level + 1] if child.level else []
                target = ".".join([*base, *(child.module.split(".") if child.module else [])])
                if target.startswith("textagent"):
                    found.add(target)
                    found.update(f"{target}.{a.name}" for a in child.names)
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("textagent"))
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) and _MODULE.fullmatch(child.value):
                found.add(child.value)  # a module named for importlib (the CLI's dispatch table): it runs too
            visit(child)

    visit(tree)
    return found


def _graph(*, typing: bool = True) -> dict[str, set[str]]:
    """module -> the modules importing it runs: those it names, and the packages they are in
    (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``), leaving out the packages the
    module is in itself (Python has run those before it)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        named = _imports(path, typing=typing)
        runs = named | {".".join(m.split(".")[:i]) for m in named for i in range(1, m.count(".") + 1)}
        graph[name] = {m for m in runs if m in modules and m != name and not name.startswith(m + ".")}
    return graph


# what protocol/ may import outside itself: the exceptions and the package's resource files
GROUND = {"textagent.errors", "textagent._resources"}


_BRANCHES = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ExceptHandler,
    ast.With,
    ast.AsyncWith,
    ast.IfExp,
    ast.comprehension,
    ast.Assert,
    ast.match_case,
)


def _complexity(fn: ast.AST) -> int:
    """McCabe's number of a function: 1 + its branches and boolean operators (nested functions
    count for themselves)."""
    count = 1
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, _BRANCHES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return count


def test_the_loop_stays_simple():
    """The loop reads like the seed's: every function of agent.py simple enough to follow on one
    screen (complexity, not a line quota that squeezes code into tuple assignments)."""
    tree = ast.parse((PACKAGE / "agent.py").read_text(encoding="utf-8"))
    scores = {
        fn.name: _complexity(fn) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert max(scores.values()) <= 15, sorted(scores.items(), key=lambda kv: -kv[1])[:3]
    assert "noqa: C901" not in (PACKAGE / "agent.py").read_text(encoding="utf-8")  # ruff's rule, no exception


def test_no_function_of_the_package_is_excused_from_the_complexity_limit():
    excused = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "noqa: C901" in line
    ]
    assert excused == []


def test_no_mode_imports_the_agent():
    graph = _graph()
    offenders = [m for m in graph if m.startswith("textagent.modes") and "textagent.agent" in graph[m]]
    assert offenders == []


def test_protocol_is_the_ground_floor():
    graph = _graph()
    above = {
        m: sorted(d for d in deps if not d.startswith("textagent.protocol") and d not in GROUND)
        for m, deps in graph.items()
        if m.startswith("textagent.protocol")
    }
    assert {m: d for m, d in above.items() if d} == {}


# The protocol's keywords, as replies write them: a pattern outside protocol/ that tells one of
# these lines from its twin reads the protocol on its own.
_KEYWORD_LINES = (
    ("TOOL: get_weather", "TQQL: get_weather"),
    ('ARGS: {"city": "Paris"}', 'AQQS: {"city": "Paris"}'),
    ("ANSWER: it is sunny", "AQQQQR: it is sunny"),
    ("Final Answer: it is sunny", "Final AQQQQr: it is sunny"),
    ("OBSERVATION (get_weather): sunny", "OQQQQQQQQQN (get_weather): sunny"),
    ("Thought: I need the weather", "TQQQQht: I need the weather"),
)
# what reads keywords outside protocol/ on purpose, or is left to move (another room's)
_KEYWORDS_ELSEWHERE = {
    "textagent.bench.baseline",  # the seed's regex parser: a baseline, regexes by definition
}
_RE_CALLS = {"compile", "match", "search", "sub", "subn", "fullmatch", "findall", "finditer", "split"}


def _keyword_patterns(path: pathlib.Path) -> list[str]:
    """The regexes of ``path`` (literal patterns given to ``re``) that match a keyword line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RE_CALLS):
            continue
        if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args):
            continue
        pattern = node.args[0]
        if not (isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)):
            continue
        flags = 0
        for arg in [*node.args[1:], *(k.value for k in node.keywords if k.arg == "flags")]:
            text = ast.unparse(arg)
            flags |= (re.I if "re.I" in text or "IGNORECASE" in text else 0) | (re.M if "re.M" in text else 0)
        compiled = re.compile(pattern.value, flags)
        if any(compiled.search(line) and not compiled.search(twin) for line, twin in _KEYWORD_LINES):
            found.append(f"{path.name}:{node.lineno} {pattern.value[:60]}")
    return found


def test_protocol_keywords_are_read_in_protocol_only():
    """No regex outside protocol/ reads a keyword of the protocol (protocol.words and the line
    reader do), and nothing outside imports the line reader, the parser's inside."""
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        if name.startswith("textagent.protocol") or name in _KEYWORDS_ELSEWHERE:
            continue
        found = _keyword_patterns(path)
        if found:
            offenders[name] = found
    assert offenders == {}
    graph = _graph()
    inside = {"textagent.protocol.lines", "textagent.protocol.reader"}
    importers = {m for m, deps in graph.items() if not m.startswith("textagent.protocol") and deps & inside}
    assert importers == set()


def test_no_import_cycle_in_the_package():
    # imports for type checkers only never run, so they cannot make a cycle
    graph = _graph(typing=False)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep] if dep in path else [node, dep])
            elif dep not in state:
                walk(dep, [*path, dep])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_no_proxy_module_uses_another_ones_private_names():
    """proxy/'s modules speak to each other through public names only (from .x import _y, or
    x._y after from . import x, is reaching into another room)."""
    found = []
    for path in (PACKAGE / "proxy").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        siblings = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
                if node.module is None:
                    siblings.update({a.asname or a.name: a.name for a in node.names})
        found += [
            f"{path.name}:{node.lineno} {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in siblings
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ]
    assert found == []


# textagent's backend classes: outside backends/, what a backend can do is asked of its
# Capabilities (capabilities_of), never of its class or of the attributes it happens to have
BACKEND_CLASSES = {"LlamaCppBackend", "OllamaBackend", "OpenAICompletionsBackend", "ChatAsTextBackend", "HTTPBackend"}


def _outside_backends() -> list[pathlib.Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if (PACKAGE / "backends") not in p.parents)


def _asks_type(node: ast.AST) -> bool:
    """``isinstance(x, LlamaCppBackend)`` (or a tuple naming one), or ``hasattr(<a backend>, name)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2):
        return False
    subject, about = (ast.unparse(arg) for arg in node.args)
    if node.func.id == "isinstance":
        return bool(BACKEND_CLASSES & set(re.findall(r"\w+", about)))
    return node.func.id == "hasattr" and "backend" in subject.lower()


def test_backends_are_asked_their_capabilities_not_their_type():
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}"
        for path in _outside_backends()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _asks_type(node)
    ]
    assert found == []


def test_the_rule_above_sees_what_it_forbids():
    code = "isinstance(self.backend, (LlamaCppBackend, X))\nhasattr(backend, 'prefix_cache')\nhasattr(tool, 'x')"
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)]
    assert [_asks_type(c) for c in calls] == [True, True, False]


def test_model_servers_are_asked_through_the_backends():
    """HTTP to a model server goes through backends/ (timeouts, retries, errors translated);
    local/ alone, which starts and watches the embedded server, asks it on its own."""
    found = [
        str(path.relative_to(PACKAGE))
        for path in _outside_backends()
        if (PACKAGE / "local") not in path.parents and "requests" in _third_party_imports(path)
    ]
    assert found == []


def _third_party_imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
