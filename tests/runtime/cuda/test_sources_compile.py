"""Every CUDA source flopcount generates compiles with NVRTC for the V100, A100 and H100 (``sm_70``,
``sm_80``, ``sm_90``: the ``compute_XY`` PTX, then ptxas), as CuPy compiles it on those GPUs
(``cuda_compile.py``); no GPU needed. The sources:

* each raw kernel in ``catalog.raw_sources()``: every kernel, dtype and attention mask kind.
  ptxas's registers and static shared memory must fit the block its ``__launch_bounds__`` allows
  on that GPU (``cuda/limits.py``);
* the generated elementwise kernels, in float16, bfloat16, float32 and float64: the chain of
  every ``fused_elementwise`` node in every zoo model's optimized graph (eval and train, with
  and without conv + batch-norm folding), every kernel the op examples make the CUDA kernels
  build (single activations with their attributes, fused chains; in the dtypes the runtime
  has), and one chain of every expression.

A failure prints NVRTC's log and the source lines it names. The number of sources compiled is
printed at the end of the run (``conftest.py``). Skipped without CuPy's NVRTC and the CUDA
headers, unless ``FLOPCOUNT_REQUIRE_NVRTC=1`` (``.ci/run`` sets it in its CUDA environment).
"""

import numpy as np
import pytest

import cuda_compile as nvrtc
import flopcount.runtime as rt
from cuda_signatures import signatures
from fake_cupy import installed
from flopcount.runtime.cuda import limits
from flopcount.runtime.cuda.kernels import catalog, elementwise
from op_examples import load_examples, run_cuda_kernels

DTYPES = ("float16", "bfloat16", "float32", "float64")
RAW = catalog.raw_sources(DTYPES)


def _key_id(key) -> str:
    name, dtype, variant = key
    return "-".join([name, dtype] + [str(v) for v in variant])


@pytest.mark.parametrize("arch", nvrtc.ARCHS)
@pytest.mark.parametrize("key", sorted(RAW, key=str), ids=_key_id)
def test_raw_kernel_compiles_within_the_launch_limits(key, arch):
    name = key[0]
    used = nvrtc.compile_source(RAW[key], arch, what=_key_id(key))[name]
    bound = signatures(RAW[key])[name].launch_bound
    target = limits.for_arch(arch)
    assert target.problems((1,), (bound,), static_shared=used.shared, registers=used.registers) == [], used


# --- generated elementwise kernels ------------------------------------------------------------

def _zoo_chains() -> dict:
    """{kernel spec name: (steps, number of inputs, models)} of the fused chains in every zoo
    model's optimized graph, traced on the meta device."""
    from flopcount import models
    from flopcount.runtime.graph.passes import optimize

    chains = {}
    for model_name in models.names():
        with rt.meta():
            model = models.get(model_name)
        inputs = models.example_input(model_name, batch=2, device="meta")  # batch 2: batch norm trains
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        for training in (False, True):
            graph = rt.trace(model.train(training), *inputs)
            for fold_bn in (False, True):
                for node in optimize(graph, fold_bn=fold_bn).nodes:
                    if node.op_name == "fused_elementwise":
                        steps = node.attrs["steps"]
                        key = elementwise.kernel_spec(steps, len(node.inputs), "float32")["name"]
                        chains.setdefault(key, (steps, len(node.inputs), set()))[2].add(model_name)
    return chains


def _every_expression() -> tuple:
    """One chain through every expression of ``elementwise.EXPRESSIONS``, over two inputs."""
    attrs = {"clamp": {"min": -1.0, "max": 1.0}, "hardtanh": {"min_val": 0.0, "max_val": 6.0},
             "leaky_relu": {"negative_slope": 0.1}, "gelu": {"approximate": "tanh"},
             "softplus": {"beta": 2.0, "threshold": float("inf")},
             "elu": {"alpha": 1.0, "scale": 1.05, "input_scale": 0.5}}
    steps = []
    for name in sorted(elementwise.EXPRESSIONS):
        prev = -len(steps) if steps else 0
        binary = name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
        steps.append((name, (prev, 1) if binary else (prev,), attrs.get(name, {})))
    return tuple(steps), 2


@pytest.fixture(scope="module")
def elementwise_specs() -> dict:
    """{dtype: {kernel name: (spec, what it is)}} of every generated kernel to compile."""
    nvrtc.version()  # skip (or fail) before the work when NVRTC is missing
    specs = {dtype: {} for dtype in DTYPES}
    chains = _zoo_chains()
    assert chains, "no zoo model has a fused elementwise chain"
    for dtype in DTYPES:
        for steps, n_inputs, model_names in chains.values():
            spec = elementwise.kernel_spec(steps, n_inputs, dtype)
            specs[dtype][spec["name"]] = (spec, f"the fused chain of {', '.join(sorted(model_names))}")
        spec = elementwise.kernel_spec(*_every_expression(), dtype)
        specs[dtype][spec["name"]] = (spec, "a chain of every expression")
    with installed() as fake:  # in every dtype the runtime has
        run_cuda_kernels(fake, load_examples(), [np.dtype(d).type for d in DTYPES])
    assert fake.elementwise
    for call in fake.elementwise:
        spec = call.spec
        specs[str(call.arrays[0].dtype)].setdefault(spec["name"], (spec, "built by an op example"))
    return specs


@pytest.mark.parametrize("arch", nvrtc.ARCHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_generated_elementwise_kernels_compile(elementwise_specs, dtype, arch):
    failures = []
    for name, (spec, what) in sorted(elementwise_specs[dtype].items()):
        try:
            nvrtc.compile_source(nvrtc.elementwise_source(spec, dtype), arch, what=f"{name} ({what})",
                                 kind="elementwise")
        except nvrtc.NvrtcError as exc:
            failures.append(str(exc))
    assert not failures, "\n\n".join(failures)


def test_the_zoo_has_fused_chains_and_each_is_compiled(elementwise_specs):
    chains = _zoo_chains()
    models_with_chains = set().union(*(m for _, _, m in chains.values()))
    assert {"resnet50", "gpt2", "llama", "efficientnet_b0"} <= models_with_chains
    for dtype in DTYPES:
        for steps, n_inputs, _ in chains.values():
            assert elementwise.kernel_spec(steps, n_inputs, dtype)["name"] in elementwise_specs[dtype]


# --- a source NVRTC refuses is reported with its log and the line ------------------------------

def test_a_broken_kernel_is_reported_with_nvrtcs_message_and_line():
    lines = RAW[("softmax_rows", "float32", ())].splitlines()
    at = next(i for i, line in enumerate(lines) if "ACC s = 0;" in line)
    lines[at] = lines[at].replace("ACC s = 0;", "ACC s = undefined_total;")
    with pytest.raises(nvrtc.NvrtcError) as refused:
        nvrtc.compile_source("\n".join(lines), "sm_80", what="softmax_rows with a typo")
    message = str(refused.value)
    assert f'kernel.cu({at + 1}): error: identifier "undefined_total" is undefined' in message
    assert f">{at + 1:5d}: {lines[at]}" in message  # the line itself, quoted under the log
    assert message.startswith("NVRTC refused softmax_rows with a typo for sm_80")


# --- the flash-attention kernel keeps its accumulators in registers ----------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_compiles_without_spilling(dtype, arch):
    from flopcount.runtime.cuda.kernels import flash_attention

    used = nvrtc.compile_source(flash_attention.source(dtype), arch, what=f"flash_attention {dtype}")
    assert used["flash_attention"].spill_stores == 0, used  # a spilled accumulator goes through local memory


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["flash_attention_dq", "flash_attention_dkv"])
def test_flash_attention_backward_compiles_without_spilling(name, dtype, arch):
    from flopcount.runtime.cuda.kernels import flash_attention_backward

    used = nvrtc.compile_source(flash_attention_backward.source(name, dtype), arch, what=f"{name} {dtype}")
    assert used[name].spill_stores == 0, used  # dK and dV's accumulators stay in registers too
