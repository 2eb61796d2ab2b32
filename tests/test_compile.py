"""tidu.compile: programs from materialized graphs, cached by structure."""

import numpy as np
import pytest
from tidu.lowering.compile import Instruction, _build, clear_cache, compile

from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import Attrs, Aval, Literal, Named
from tidu.ops.catalog import catalog


def graph(shape=(3,), dtype="float64", value=2.0, inputs_first=True):
    """y = x * c + x, with fresh Aval and Attrs objects on every call."""
    aval = Aval(shape, dtype)
    x = MNode(None, Attrs(), (), Aval(shape, dtype), Named("x"))
    c = MNode("constant", Attrs(value=Literal(np.full(shape, value, dtype=dtype))), (), Aval(shape, dtype))
    if inputs_first:
        nodes = [x, c, MNode("mul", Attrs(), (0, 1), aval), MNode("add", Attrs(), (2, 0), aval)]
        return MaterializedGraph(nodes, [0], [3])
    nodes = [c, x, MNode("mul", Attrs(), (1, 0), aval), MNode("add", Attrs(), (2, 1), aval)]
    return MaterializedGraph(nodes, [1], [3])


def test_structurally_equal_graphs_share_one_program():
    clear_cache()
    a, b = compile(graph()), compile(graph())
    assert a is b  # equal by value, not the same Aval or Attrs objects
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(a.run({"x": x})[0], x * 2.0 + x)


@pytest.mark.parametrize("other", [dict(shape=(4,)), dict(dtype="float32"), dict(value=3.0)])
def test_graphs_that_differ_in_an_aval_or_attribute_get_their_own_program(other):
    clear_cache()
    a, b = compile(graph()), compile(graph(**other))
    assert a is not b
    assert a.slot_avals != b.slot_avals or a.instructions != b.instructions


def test_in_place_build_is_the_general_one():
    cat = catalog()
    first, later = _build(graph(), cat), _build(graph(inputs_first=False), cat)
    assert first.instructions == [
        Instruction("constant", first.instructions[0].attrs, (), (1,)),
        Instruction("mul", Attrs(), (0, 1), (2,)),
        Instruction("add", Attrs(), (2, 0), (3,)),
    ]
    assert all(type(ins) is Instruction for ins in first.instructions)
    assert [i.op for i in later.instructions] == [i.op for i in first.instructions]
    assert later.instructions[1:] == first.instructions[1:]  # slots renumbered: input first
    assert first.slot_avals == later.slot_avals and first.input_slots == later.input_slots == [0]


def test_an_input_missing_from_the_inputs_is_reported():
    g = graph()
    g.nodes.append(MNode(None, Attrs(), (), Aval((3,), "float64"), Named("z")))
    with pytest.raises(ValueError, match="graph node 4 is an input missing from graph.inputs"):
        compile(g, cache=False)
