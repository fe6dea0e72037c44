"""The engine's imports run one way: no circle among lingyi's modules, and no package imports
one above it (issue 23).

A newcomer reads the architecture from the folder names only if the dependencies agree with
it: the check library knows nothing of the kinds of input that use it, the layer nothing of
the server, the log nothing of the stats. Imports are read from the source (every ``import``
statement, also inside functions, except those under ``if TYPE_CHECKING:``, which never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

# The layer of each package or module of lingyi (the first name after ``lingyi.``): a module
# may import its own layer and those below, never one above. Two chains meet in ``guard``:
# base < text < policy < checks < kinds < plan < layer, and base < redact < log < stats.
LAYERS: dict[str, int] = {
    # base: data types, errors, texts, ids, paths
    **dict.fromkeys(
        (
            "__init__", "_ids", "_locks",
            "_logging", "_regex", "_validation", "errors", "kinds",
            "messages", "models", "paths", "backends",
        ),
        0,
    ),
    "text": 1,
    "redact": 1,
    "policy": 2,
    # the deployment's config, which names what redaction does ([redact]), and what reads it
    "config": 2,
    "config_paths": 2,
    "telemetry": 2,
    "log": 2,
    "store": 2,  # the index beside the log: its readers (appeals, query) and the log are one layer
    "ledger": 2,  # the session evidence, indexed on canonical text
    "council": 2,  # the council record (redacted, canonical text)
    "checks": 3,
    "stats": 3,
    "report": 4,
    # the kinds of input (lingyi.kinds registers them through entry points)
    "answers": 4,
    "conclusions": 4,
    "tasks": 4,
    "plan": 5,
    "layer": 6,
    "judge": 6,
    "guard": 7,
    "pipeline": 7,  # one guarded call: verify → approvals → execute → audit → record → reply
    "verdict": 7,  # what a guarded call answers: the one verdict and the reply around it
    "approvals": 7,
    "gateway": 7,
    "demo": 8,
    "server": 8,
    "cli": 9,
    "__main__": 9,  # python -m lingyi: the command line
    "replay": 8,
    "policy_diff": 8,  # decides inputs under two policy folders, as replay does
}  # fmt: skip


# Imports against the rules that other work removes (issue 23), each with what removes it. A
# listed import that is gone fails test_known_exceptions_still_exist: remove it here then.
KNOWN: dict[tuple[str, str], str] = {
    # policy validates each check's params with the check registry: the compiled plan
    # (lingyi.plan) takes that over, and the policy stops importing the checks
    ("lingyi.policy._load", "lingyi.checks"): "plan",
    ("lingyi.policy._model", "lingyi.checks"): "plan",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / "lingyi").rglob("*.py"))}


def _runs(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that runs: nothing under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for body in node.orelse for n in _runs_node(body))
            continue
        yield from _runs_node(node)


def _runs_node(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _runs(node)


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The lingyi modules ``name`` imports (a name from a package: its submodule, if one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runs(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
            continue
        base = node.module or ""
        if node.level:
            up = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*up, base] if base else up)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def graph(*, everything: bool = False) -> dict[str, set[str]]:
    """Who imports whom; without ``everything``, the KNOWN exceptions left out."""
    found = modules()
    known = set(found)
    edges = {name: imports_of(name, path, known) for name, path in found.items()}
    if not everything:
        for src, dst in KNOWN:
            edges.get(src, set()).discard(dst)
    return edges


def layer_of(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    assert key in LAYERS, f"{module}: add {key!r} to LAYERS in tests/test_layering.py"
    return LAYERS[key]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while (top := stack.pop()) != node:
                part.append(top)
            part.append(node)
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    """No lingyi module imports, through any chain, a module that imports it."""
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(" ⇄ ".join(c) for c in found)


def test_no_import_against_the_layering() -> None:
    """A module imports only its own layer and those below (LAYERS)."""
    wrong = [
        f"{src} ({layer_of(src)}) imports {dst} ({layer_of(dst)})"
        for src, targets in sorted(graph().items())
        for dst in sorted(targets)
        if layer_of(dst) > layer_of(src)
    ]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_known_exceptions_still_exist() -> None:
    """Each KNOWN exception is still an import (a removed one is taken off the list)."""
    edges = graph(everything=True)
    gone = [f"{a} -> {b} ({why})" for (a, b), why in KNOWN.items() if b not in edges.get(a, ())]
    assert not gone, "no longer imported; remove from KNOWN:\n" + "\n".join(gone)


def test_every_package_has_a_layer() -> None:
    """A new package is placed in the table on purpose, not by default."""
    for name in modules():
        layer_of(name)


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_circles_are_found(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The circle finder reports a circle of two, of three, and none in a chain."""
    assert circles(edges) == expected


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` never runs; one inside a function does."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from lingyi.server import app\n"
        "def f():\n    from lingyi import guard\n"
    )
    path = tmp_path / "m.py"
    path.write_text(source)
    known = {"lingyi.server.app", "lingyi.server", "lingyi.guard", "lingyi"}
    assert imports_of("lingyi.x", path, known) == {"lingyi.guard"}
