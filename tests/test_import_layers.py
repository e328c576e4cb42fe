"""Imports flow one way (ARCHITECTURE.md): ``cli -> api -> {eager_hooks, graph_parser} ->
recording -> {conventions, report}``, everything may import ``runtime``, and ``runtime`` imports
none of them. No circle of imports joins two of flopcount's parts, and inside the runtime the
only circle is its core's (a tensor's methods are its ops, and ops make tensors).

Every ``import`` statement counts, those inside functions too: an import deferred to call time
still ties the two parts together. Read from the source files, so nothing is imported here."""

from __future__ import annotations

import ast
import functools
import pathlib

import flopcount

PACKAGE = pathlib.Path(flopcount.__file__).parent

# the one-way chain, highest first: a part may import the parts below it, never those above
CHAIN = [("cli",), ("api",), ("eager_hooks", "graph_parser"), ("recording",), ("conventions", "report")]
# the runtime's core, one circle by nature: a tensor's methods are ops, ops make tensors through
# the dispatcher, which records autograd and places arrays on a device (whose CUDA backend has
# kernels for ops); factories and random numbers make tensors on devices. Not worth breaking
# (the decision); everything else in the runtime (graph, nn, onnx, torch, io...) sits on it.
RUNTIME_CORE = {"tensor", "ops", "dispatch", "autograd", "factories", "random", "registry", "device", "cuda"}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    relative = PACKAGE.parent.joinpath(*name.split("."))
    return relative.with_suffix(".py").exists() or (relative / "__init__.py").exists()


def _imports(path: pathlib.Path) -> set:
    """The flopcount modules ``path`` imports (``from X import name`` is ``X.name`` when that is
    a module, else ``X``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for a in node.names:
                found.add(f"{origin}.{a.name}" if _is_module(f"{origin}.{a.name}") else origin)
    return {m for m in found if m == "flopcount" or m.startswith("flopcount.")}


@functools.lru_cache(maxsize=1)
def _all_imports() -> tuple:
    """(module name, the flopcount modules it imports) of every source file."""
    return tuple((_module_name(path), _imports(path)) for path in sorted(PACKAGE.rglob("*.py")))


def _edges(part_of) -> dict:
    """{part: {parts it imports}} where ``part_of(module name)`` names a module's part (None:
    left out)."""
    edges: dict = {}
    for module, imported in _all_imports():
        source = part_of(module)
        if source is None:
            continue
        for target in map(part_of, imported):
            if target is not None and target != source:
                edges.setdefault(source, set()).add(target)
    return edges


def _circles(edges: dict) -> list:
    """The strongly connected components of more than one part (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def _top_part(module: str):
    # the package's __init__ (its public names) and __main__ stand above everything
    parts = module.split(".")
    return None if len(parts) == 1 or parts[1] == "__main__" else parts[1]


def _runtime_part(module: str):
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "runtime" else None


def test_no_circle_joins_two_parts_of_flopcount():
    assert _circles(_edges(_top_part)) == [], "import circle between flopcount's parts (see ARCHITECTURE.md)"


def test_the_runtime_imports_nothing_above_it():
    above = _edges(_top_part).get("runtime", set())
    assert not above, f"flopcount/runtime imports {sorted(above)}: the runtime must not know its users"


def test_the_counting_chain_goes_one_way():
    rank = {part: len(CHAIN) - i for i, group in enumerate(CHAIN) for part in group}
    upward = [f"{a} -> {b}" for a, targets in _edges(_top_part).items() for b in targets
              if a in rank and b in rank and rank[a] <= rank[b]]
    assert not upward, f"imports against the one-way chain {CHAIN}: {upward}"


def test_inside_the_runtime_the_only_circle_is_the_core():
    circles = _circles(_edges(_runtime_part))
    assert len(circles) == 1 and set(circles[0]) <= RUNTIME_CORE, (
        f"import circles inside flopcount/runtime: {circles}; the only one allowed is the core's, "
        f"{sorted(RUNTIME_CORE)}: import the other part lazily or move the shared piece into a leaf module")


def _module(module: str):
    return module


def test_no_circle_between_modules():
    # outside the runtime's core, not even two modules of one part import each other in a circle
    core = {f"flopcount.runtime.{name}" for name in RUNTIME_CORE}
    new = [c for c in _circles(_edges(_module))
           if not all(m in core or any(m.startswith(k + ".") for k in core) for m in c)]
    assert not new, (f"import circles between modules: {new}; import one side lazily, or move the piece both "
                     f"need into a module of its own")


def test_the_import_reader_sees_imports():
    # the checks above are only as good as this reader: it must see what ARCHITECTURE.md draws
    edges = _edges(_top_part)
    assert {"api", "options"} <= edges["cli"] and {"eager_hooks", "graph_parser"} <= edges["api"]
    assert "recording" in edges["graph_parser"] and "runtime" in edges["recording"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
