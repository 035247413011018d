"""The project's modules import one another without a circle.

The graph holds every module of the distribution (the core, the actions and the
plugins, under the names they are installed as) and, for each, the project modules it
imports when it is loaded: imports at module level outside `if TYPE_CHECKING:` (those
are for type checkers only, never executed). A circle there would make what a module
holds depend on which of its circle is imported first."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# installed package -> its folder in the repository (pyproject.toml's package-dir)
PACKAGES = {"vscheduler": "vscheduler", "vscheduler.actions": "actions",
            "vscheduler.plugins": "plugins"}


def project_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def loaded_imports(tree: ast.Module) -> set[str]:
    """Names imported when the module is loaded (both `a.b` and `a.b.c` for
    `from a.b import c`, since `c` may be a module)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                if not _is_type_checking(stmt.test):
                    visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse,
                              stmt.finalbody):
                    visit(block)
            elif isinstance(stmt, ast.Import):
                names.update(alias.name for alias in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                names.add(stmt.module)
                names.update(f"{stmt.module}.{alias.name}" for alias in stmt.names)
    visit(tree.body)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: {imported for imported in loaded_imports(ast.parse(path.read_text()))
                   if imported in modules and imported != name}
            for name, path in modules.items()}


def find_circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of the graph, as the modules on it, or [] if it has none."""
    done: set[str] = set()
    path: list[str] = []

    def walk(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return []
        path.append(module)
        for imported in sorted(graph[module]):
            circle = walk(imported)
            if circle:
                return circle
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        circle = walk(module)
        if circle:
            return circle
    return []


def test_the_project_has_no_import_circle() -> None:
    graph = import_graph()
    assert "vscheduler.framework.session" in graph and "vscheduler.plugins.gang" in graph
    assert find_circle(graph) == []


def test_find_circle_finds_one() -> None:
    # the check itself: a circle through three modules, and the import left out when it
    # is only for type checkers
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_circle(graph) == ["a", "b", "c", "a"]
    tree = ast.parse("from typing import TYPE_CHECKING\nimport x\n"
                     "if TYPE_CHECKING:\n    import y\nelse:\n    import z\n")
    assert loaded_imports(tree) == {"typing", "typing.TYPE_CHECKING", "x", "z"}


def test_the_plugin_api_names_no_framework_module() -> None:
    """What a plugin author reads (hookspecs) names the session only as its
    `SessionView`: not even a type-only import of the framework's session."""
    tree = ast.parse((ROOT / "vscheduler" / "hookspecs.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name and name.startswith(
        "vscheduler.framework.") and name != "vscheduler.framework.results"}
