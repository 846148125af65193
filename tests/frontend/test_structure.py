"""The frontend's modules import each other without a circle: no lazy import stands in for a module-level one."""

import ast
from pathlib import Path

FRONTEND = Path(__file__).resolve().parents[2] / "irflow" / "frontend"


def frontend_imports(tree: ast.AST) -> list[ast.ImportFrom]:
    return [
        node for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("irflow.frontend")
    ]


def imported_modules(node: ast.ImportFrom) -> set[str]:
    if node.module == "irflow.frontend":
        return {alias.name for alias in node.names}
    return {node.module.split(".")[2]}


def test_the_module_graph_has_no_cycle():
    modules = {path.stem for path in FRONTEND.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in FRONTEND.glob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = [n for n in frontend_imports(tree) if n in tree.body]  # TYPE_CHECKING blocks are not
        graph[path.stem] = {m for n in top_level for m in imported_modules(n)} & modules
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dep in sorted(graph[module]):
            assert state.get(dep) != "open", f"import cycle: {' -> '.join(path + [dep])}"
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_function_imports_another_frontend_module():
    for path in FRONTEND.glob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = set(map(id, tree.body))
        type_only = {id(n) for node in tree.body if isinstance(node, ast.If) for n in ast.walk(node)}
        late = [n.lineno for n in frontend_imports(tree) if id(n) not in top_level and id(n) not in type_only]
        assert not late, f"{path.name}: lazy frontend imports at lines {late}"
