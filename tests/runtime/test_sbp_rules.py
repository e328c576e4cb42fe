"""Every SBP signature an op's rule lists is true: run the op's example split that way over two
ranks (inputs sliced, or drawn into random partial summands), join the ranks' outputs by the
output SBPs, and compare with the op run whole. Layout ops' maps are checked the same way."""

import importlib.util
import pathlib

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.parallel.execute import join, split
from flopcount.runtime.sbp import P, Split, divides, replicated

from opcheck import Recorder

N = 2
OPS_DIR = pathlib.Path(__file__).parent / "ops"


def _examples() -> dict:
    out = {}
    for path in sorted(OPS_DIR.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_sbp_examples_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out.update(getattr(module, "EXAMPLES", {}))
    return out


EXAMPLES = _examples()
X = np.arange(48.0).reshape(4, 12)
# layout cases whose slices leave dims whole or cover whole blocks (q, k, v of a fused projection)
LAYOUT_CASES = {
    "getitem": [lambda x: x[:, 4:8], lambda x: x[2:, :]],
    "getitem_backward": [lambda x: _scatter(x, (slice(None), slice(8, 12))), lambda x: _scatter(x, (slice(0, 2),))],
}


def _scatter(x, key):
    """The gradient op of ``x[key]``: the slice written into zeros of ``x``'s shape."""
    from flopcount.runtime.ops.indexing import GetItemBackward, normalize_index

    items, _ = normalize_index(x, key)
    return rt.apply(GetItemBackward, x[key], shape=tuple(x.shape), items=items)


def _call(name, ex):
    """(op, input arrays, attrs, output arrays) of the example's call of op ``name`` in float64."""
    tensors = [rt.tensor(a.astype(np.float64)) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
               else (rt.tensor(a) if isinstance(a, np.ndarray) else a) for a in ex.arrays]
    rec = Recorder()
    with rt.observe(rec):
        ex.fn(*tensors)
    event = next(e for e in rec.events if e.op.name == name)
    arrays = [None if t is None else np.asarray(t.data) for t in event.inputs]
    return event.op, arrays, dict(event.attrs), [np.asarray(o.data) for o in event.outputs], event


def _specs(event):
    outs = tuple(o for o in event.outputs)
    return (outs if len(outs) > 1 else outs[0]), list(event.inputs)


def _deterministic(op, attrs) -> bool:
    return not op.random or (attrs.get("dropout_p", attrs.get("p", 0.0)) == 0.0 and not attrs.get("training", False))


def _signatures(op, event):
    out, ins = _specs(event)
    return [sig for sig in op.sbp(out, *ins, **event.attrs)]


RULED = sorted(name for name, ex in EXAMPLES.items() if rt.registered_ops()[name].sbp is not None)
LAYOUT = sorted(name for name in EXAMPLES if rt.registered_ops()[name].layout)


@pytest.mark.parametrize("name", RULED)
def test_every_signature_of_the_rule_computes_the_whole_op(name):
    op, arrays, attrs, whole, event = _call(name, EXAMPLES[name])
    if not _deterministic(op, attrs):
        pytest.skip(f"{name} draws random numbers in this example")
    out_spec, in_specs = _specs(event)
    outs = out_spec if isinstance(out_spec, tuple) else (out_spec,)
    checked = 0
    for sig in _signatures(op, event) + [replicated(in_specs, len(outs))]:
        shapes = [None if a is None else a.shape for a in arrays] + [o.shape for o in whole]
        sbps = list(sig.inputs) + list(sig.outputs)
        if not all(s is None or sh is None or divides(sh, s, N) for sh, s in zip(shapes, sbps)):
            continue
        if any(s is P and a is not None and a.dtype.kind != "f" for a, s in zip(arrays, sig.inputs)):
            continue
        parts = [None if a is None else split(a, s, N, seed=i) for i, (a, s) in enumerate(zip(arrays, sig.inputs))]
        results = []
        for r in range(N):
            local = [None if p is None else rt.tensor(p[r]) for p in parts]
            local_attrs = op.shard_attrs(dict(attrs), sig, N, r, out_spec, *in_specs)
            with rt.no_grad():
                got = rt.apply(op, *local, **local_attrs)
            results.append([np.asarray(t.data) for t in (got if isinstance(got, tuple) else (got,))])
        for k, (w, s) in enumerate(zip(whole, sig.outputs)):
            joined = join([res[k] for res in results], s)
            np.testing.assert_allclose(joined, w, rtol=1e-9, atol=1e-9,
                                       err_msg=f"{name} under {sig}, output {k}")
        checked += 1
    assert checked >= 1


def _layout_cases():
    for name in LAYOUT:
        yield name, EXAMPLES[name]
        for k, fn in enumerate(LAYOUT_CASES.get(name, ())):
            yield f"{name}#{k}", type(EXAMPLES[name])(fn, [X])


@pytest.mark.parametrize("name, ex", list(_layout_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_layout_maps_give_the_same_elements(name, ex):
    case, name = name, name.split("#")[0]
    op, arrays, attrs, whole, event = _call(name, ex)
    (x,) = [a for a in arrays if a is not None][:1]
    out_spec, in_specs = _specs(event)
    tried = 0
    for d in range(x.ndim):
        for blocks in (1, 2, 3):
            sbp = Split(d, blocks)
            if not divides(x.shape, sbp, N):
                continue
            mapped = op.output_sbp(sbp, N, out_spec, in_specs[0], **attrs)
            if mapped is None:
                continue
            back = op.input_sbp(mapped, N, out_spec, in_specs[0], **attrs)
            assert back is not None and op.output_sbp(back, N, out_spec, in_specs[0], **attrs) == mapped
            parts = split(x, sbp, N)
            results = []
            for r in range(N):
                from flopcount.runtime.sbp import Signature

                local_attrs = op.shard_attrs(dict(attrs), Signature((sbp,), (mapped,)), N, r, out_spec, *in_specs)
                with rt.no_grad():
                    results.append(np.asarray(rt.apply(op, rt.tensor(parts[r]), **local_attrs).data))
            np.testing.assert_allclose(join(results, mapped), whole[0], err_msg=f"{case}: {sbp} -> {mapped}")
            tried += 1
    if case == name and name in LAYOUT_CASES:
        return  # the op's own example slices every dim; the cases above split through it
    assert tried >= 1, f"{case}: no split of its example maps through"
