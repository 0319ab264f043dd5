"""The code's layout rules (README "Layout", docs/tiers.md): small modules, one visible
orchestration, imports that point one way with no circle, and no hidden imports of the
project's own modules inside functions (except documented lazy ones)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("capplan", "forecasting", "optimizer")
OURS = PACKAGES + ("dashboards",)
MAX_MODULES = 15


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


def test_every_folder_holds_at_most_15_modules_and_says_what_lives_there():
    """Folders name kinds of thing: a folder with more than :data:`MAX_MODULES` modules is a heap to split into
    rooms, and every subpackage's ``__init__`` docstring says in a paragraph what lives there."""
    crowded, silent = {}, []
    for pkg in PACKAGES:
        for folder in [ROOT / pkg, *(d for d in (ROOT / pkg).rglob("*") if d.is_dir() and d.name != "__pycache__")]:
            mods = [f for f in folder.glob("*.py") if f.name != "__init__.py"]
            if len(mods) > MAX_MODULES:
                crowded[str(folder.relative_to(ROOT))] = len(mods)
            init = folder / "__init__.py"
            if mods and (not init.exists() or not ast.get_docstring(ast.parse(init.read_text()))):
                silent.append(str(folder.relative_to(ROOT)))
    assert not crowded, f"folders over {MAX_MODULES} modules (split them into rooms by kind): {crowded}"
    assert not silent, f"subpackages whose __init__ has no docstring saying what lives there: {silent}"


def test_the_pipeline_stays_a_visible_orchestration():
    assert len((ROOT / "capplan" / "run" / "pipeline.py").read_text().splitlines()) <= 200


def test_no_re_export_shims():
    """A name has one import path: no module imports a name only to hand it on (``noqa: F401``); an import kept
    for its side effect of registering plug-ins says so (``registration``)."""
    shims = []
    for _, f in _modules():
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if "noqa: F401" in line and "registration" not in line:
                shims.append(f"{f.relative_to(ROOT)}:{i}")
    assert not shims, f"re-export shims (import the name from where it is defined): {shims}"


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
