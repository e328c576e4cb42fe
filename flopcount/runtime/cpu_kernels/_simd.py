"""The pieces of LLVM IR that the hand-vectorized kernels share (numba's ``intrinsic``): this
CPU's vector width, a pointer into an array, a scalar broadcast to every lane, a fused
multiply-add, a store of the first lanes only, a prefetch, and a counted loop carrying its
values in registers.

Kernels are written in IR where their sums must stay in registers across a loop (the GEMM's
run down K, the convs' runs over kernel positions): the compiler's vectorizer keeps a
plain loop's accumulators in memory. Vectors are 16 floats where the CPU has AVX-512 and 8
with AVX2 and FMA; ``available()`` is False on other CPUs, where a fused multiply-add would be
a library call per element.
"""

from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir


def _lanes() -> int:
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 16
    if features.get("avx2") and features.get("fma"):
        return 8
    return 0


LANES = _lanes()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VECTOR = ir.VectorType(ir.FloatType(), max(LANES, 1))


def available() -> bool:
    """Whether this CPU has the vector fused multiply-add the kernels are built on."""
    return LANES > 0


def data(context, builder, array_type, value, offset):
    """A pointer to element ``offset`` of a 1-d or flat array argument."""
    return builder.gep(context.make_array(array_type)(context, builder, value).data, [offset])


def load_vector(builder, pointer):
    """LANES floats from ``pointer`` (any alignment)."""
    return builder.load(builder.bitcast(pointer, VECTOR.as_pointer()), align=4)


def splat(builder, scalar, vector_type=VECTOR):
    """``scalar`` in every lane."""
    undefined = ir.Constant(vector_type, ir.Undefined)
    first = builder.insert_element(undefined, scalar, ir.Constant(I32, 0))
    return builder.shuffle_vector(first, undefined, ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))


def _llvm_function(builder, name, return_type, argument_types):
    """LLVM's intrinsic ``name``, declared in the builder's module the first time it is asked for."""
    module = builder.module
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(return_type, argument_types), name=name)


def fma(builder, a, b, c):
    """a·b + c in every lane, rounded once."""
    return builder.call(_llvm_function(builder, f"llvm.fma.v{LANES}f32", VECTOR, [VECTOR] * 3), [a, b, c])


def counted_loop(builder, count, starts: list, body) -> list:
    """Emit ``for i in range(count)`` (an i64 ``count`` >= 1) carrying values in registers:
    ``values = starts``, then ``values = body(i, values)`` each step; returns the values of the
    last step, with the builder placed after the loop. The register-blocked kernels' sums are
    such values (phi nodes), which is what keeps them out of memory."""
    start_block = builder.block
    loop_block = builder.append_basic_block("loop")
    done_block = builder.append_basic_block("done")
    builder.branch(loop_block)
    builder.position_at_end(loop_block)
    index = builder.phi(I64)
    index.add_incoming(ir.Constant(I64, 0), start_block)
    carried = [builder.phi(value.type) for value in starts]
    for phi, value in zip(carried, starts):
        phi.add_incoming(value, start_block)
    new = body(index, carried)
    for phi, value in zip(carried, new):
        phi.add_incoming(value, builder.block)
    following = builder.add(index, ir.Constant(I64, 1))
    index.add_incoming(following, builder.block)
    builder.cbranch(builder.icmp_signed("<", following, count), loop_block, done_block)
    builder.position_at_end(done_block)
    return new


def prefetch_line(builder, pointer):
    """Ask for the cache line at ``pointer`` (a float pointer) to be brought into the caches, for
    a read soon; it never faults, wherever it points."""
    i8p = ir.IntType(8).as_pointer()
    function = _llvm_function(builder, "llvm.prefetch.p0", ir.VoidType(), [i8p, I32, I32, I32])
    # read (0), locality 2 (kept in the outer caches too), data cache (1)
    builder.call(function, [builder.bitcast(pointer, i8p), ir.Constant(I32, 0), ir.Constant(I32, 2),
                            ir.Constant(I32, 1)])


def store_first(builder, value, pointer, count):
    """Lanes 0 .. count-1 of ``value`` to ``pointer`` (an i64 ``count``; none where it is <= 0):
    the rest of the memory there is neither read nor written."""
    mask_type = ir.VectorType(ir.IntType(1), LANES)
    lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
    mask = builder.icmp_signed("<", lanes, splat(builder, count, ir.VectorType(I64, LANES)))
    function = _llvm_function(builder, f"llvm.masked.store.v{LANES}f32.p0", ir.VoidType(),
                              [VECTOR, VECTOR.as_pointer(), I32, mask_type])
    builder.call(function, [value, builder.bitcast(pointer, VECTOR.as_pointer()), ir.Constant(I32, 4), mask])
