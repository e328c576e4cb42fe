"""The importers' shared tracer (``graph/importing.py``): what ``converting`` stamps into the
meta of the nodes recorded inside it, how nested conversions combine, and how errors raised
by a converter name the file node."""

from __future__ import annotations

import pytest

import flopcount.runtime as rt
from flopcount.runtime.errors import ModelFileError, ShapeError, UnsupportedOpError
from flopcount.runtime.graph.importing import ImportTracer, node_inputs, trace_import, walk_result


class _Walk:
    """A file of three nodes: a relu, an If-like node whose branch runs an add and a mul
    (the mul its own file node with a MAC dtype), and a neg outside any file node."""

    tracer = None

    def __call__(self, x):
        with self.tracer.converting("node 'r'", "block", module_type="Relu", source="r"):
            y = x.relu()
        with self.tracer.converting("node 'if'", "cond", module_type="If", source="if"):
            y = y + 1.0
            with self.tracer.converting("node 'm'", "branch", mac_dtype="int8"):
                y = y * y
        return -y


def test_each_node_gets_the_provenance_of_the_file_node_being_converted():
    graph = trace_import(_Walk(), ["image"], {}, [((2, 3), rt.float32)])
    stamped = [(n.op_name, n.scope, n.module_type, n.source, n.mac_dtype) for n in graph.nodes]
    assert stamped == [("relu", "block", "Relu", "r", None),
                       ("add", "cond", "If", "if", None),
                       # nested: its own MAC dtype, its enclosing node's module type and source
                       ("mul", "cond.branch", "If", "if", "int8"),
                       ("neg", "", "", "", None)]
    assert [v.name for v in graph.inputs] == ["image"]


def test_an_inner_file_node_overrides_only_the_keys_it_gives():
    class Walk:
        def __call__(self, x):
            with self.tracer.converting("outer", source="call", module_type="Block"):
                with self.tracer.converting("inner", source="exp"):
                    return x.exp()

    node = trace_import(Walk(), ["x"], {}, [((4,), rt.float32)]).nodes[0]
    assert (node.source, node.module_type) == ("exp", "Block")


def test_a_module_type_comes_from_the_nearest_enclosing_scope_known():
    class Walk:
        def __call__(self, x):
            with self.tracer.converting("a", "encoder.layer.dense"):
                y = x.relu()
            with self.tracer.converting("b", "decoder"):
                return y.exp()

    graph = trace_import(Walk(), ["x"], {}, [((4,), rt.float32)], module_types={"encoder.layer": "Layer"})
    assert [n.module_type for n in graph.nodes] == ["Layer", ""]


def test_folded_ops_record_nothing_and_parameters_keep_their_names():
    weight = rt.nn.Parameter(rt.ones(3))

    class Walk:
        def __call__(self, x):
            with self.tracer.converting("n", source="n"):
                two = rt.tensor(1.0) + rt.tensor(1.0)   # constants: folded, no node
                return x * weight * two

    graph = trace_import(Walk(), ["x"], {"fc.weight": (weight, "param")}, [((3,), rt.float32)])
    assert [n.op_name for n in graph.nodes] == ["mul", "mul"]
    assert list(graph.parameters) == ["fc.weight"]
    assert all(n.source == "n" for n in graph.nodes)


def _raise(exc):
    tracer = ImportTracer(lambda x: x, ["x"], {})
    with tracer.converting("ONNX Foo node 'f'", keep=(UnsupportedOpError,), prefixed="JAX ", invalid="attributes"):
        raise exc


def test_errors_name_the_file_node():
    with pytest.raises(ShapeError, match=r"^ONNX Foo node 'f': bad dims$"):
        _raise(ShapeError("bad dims"))
    with pytest.raises(UnsupportedOpError, match=r"^no kernel$"):   # kept as it is
        _raise(UnsupportedOpError("no kernel"))
    with pytest.raises(ShapeError, match=r"^JAX dot: named already$"):   # already prefixed
        _raise(ShapeError("JAX dot: named already"))
    with pytest.raises(ModelFileError, match=r"^ONNX Foo node 'f': invalid attributes or operands "
                                             r"\(ZeroDivisionError: division by zero\)$"):
        _raise(ZeroDivisionError("division by zero"))
    tracer = ImportTracer(lambda x: x, ["x"], {})
    with pytest.raises(ZeroDivisionError):   # without ``invalid``: a converter bug, left as it is
        with tracer.converting("torch node"):
            raise ZeroDivisionError("division by zero")
    assert tracer._provenance == []


def test_node_inputs_and_walk_result_read_values_by_name():
    values = {"a": 1, "b": 2}
    assert node_inputs(["a", None, "b", None, None], values, KeyError) == [1, None, 2]
    assert walk_result(["b"], values, KeyError) == 2
    assert walk_result(["b", "a"], values, KeyError) == (2, 1)
    with pytest.raises(ModelFileError, match="'c' is not computed"):
        walk_result(["a", "c"], values, lambda name: ModelFileError(f"{name!r} is not computed"))


def test_every_importer_walks_with_the_shared_tracer():
    # the importer checklist (ARCHITECTURE.md): a frontend's node walk is traced by trace_import
    # and converts each node inside tracer.converting, never with a tracer of its own
    import ast
    import pathlib

    runtime = pathlib.Path(rt.__file__).parent
    importers = sorted(runtime.glob("*/importer.py"))
    assert {p.parent.name for p in importers} >= {"onnx", "torch", "tflite", "jax"}
    for path in importers:
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").endswith("graph.importing") for alias in node.names}
        own_tracers = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                       and any(getattr(base, "id", getattr(base, "attr", "")).endswith("Tracer") for base in node.bases)]
        assert "trace_import" in imported and "converting" in path.read_text(), path
        assert not own_tracers, f"{path} defines its own tracer {own_tracers}"
