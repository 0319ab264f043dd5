"""The code's layout rules (README "Layout", docs/tiers.md): small modules, one visible
orchestration, imports that point one way with no circle, and no hidden imports of the
project's own modules inside functions (except documented lazy ones)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("capplan", "forecasting", "optimizer")
OURS = PACKAGES + ("dashboards",)
MAX_LINES = 400


def _modules():
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            mod = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            yield mod.removesuffix(".__init__"), f


def _top_level_deps(tree: ast.Module, known: set[str]) -> set[str]:
    """The project modules a module imports at its top level (``from a.b import c`` counts
    ``a.b.c`` when that is a module, else ``a.b``)."""
    deps = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OURS:
            for a in node.names:
                deps.add(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module)
        elif isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name.split(".")[0] in OURS}
    return deps


def test_no_module_is_over_400_lines_and_the_pipeline_over_200():
    big = {str(f.relative_to(ROOT)): n for _, f in _modules() if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by idea): {big}"
    assert len((ROOT / "capplan" / "pipeline.py").read_text().splitlines()) <= 200


def test_project_imports_inside_functions_are_documented_lazy_ones():
    hidden = []
    for _, f in _modules():
        lines = f.read_text().splitlines()
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                names = ([sub.module or ""] if isinstance(sub, ast.ImportFrom)
                         else [a.name for a in sub.names] if isinstance(sub, ast.Import) else [])
                if any(n.split(".")[0] in OURS for n in names) and "lazy" not in lines[sub.lineno - 1]:
                    hidden.append(f"{f.relative_to(ROOT)}:{sub.lineno}")
    assert not hidden, f"function-local imports of project modules without a 'lazy:' reason: {hidden}"


def test_no_import_circle_and_forecasting_imports_nothing_of_ours():
    mods = dict(_modules())
    graph = {m: _top_level_deps(ast.parse(f.read_text()), set(mods)) for m, f in mods.items()}
    for m, deps in graph.items():
        if m.startswith("forecasting"):
            assert not {d for d in deps if not d.startswith("forecasting")}, f"{m} imports {deps}"
        if m.startswith("optimizer"):
            assert not {d for d in deps if d.startswith(("capplan", "dashboards"))}, f"{m} imports {deps}"

    # a package imports its own __init__ implicitly; only module-to-module edges count
    edges = {m: {d for d in deps if d in graph and d != m and not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)


def test_the_circle_check_sees_a_circle(tmp_path):
    # the check above must be able to fail: a -> b -> a is reported
    a = ast.parse("from capplan.b import x\n")
    b = ast.parse("from capplan.a import y\n")
    known = {"capplan.a", "capplan.b"}
    assert _top_level_deps(a, known) == {"capplan.b"} and _top_level_deps(b, known) == {"capplan.a"}
