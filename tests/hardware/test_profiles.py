"""Hardware profiles: every accelerator the catalog promises, the datasheet figures the checks
below quote (dense where the headline is sparse), the fallback for dtypes without units, the
measured CPU, and name lookup."""

import pytest

from flopcount import hardware
from flopcount.runtime import FlopcountError

PROMISED = ["h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l4", "l40s", "a10", "rtx4090",
            "mi300x", "cpu"]


def test_the_catalog_has_every_promised_profile():
    assert set(PROMISED) <= set(hardware.names())


@pytest.mark.parametrize("name", [n for n in PROMISED if n != "cpu"])
def test_every_profile_has_the_figures_the_roofline_and_plans_need(name):
    p = hardware.get(name)
    for dtype in ("float32", "float16", "bfloat16"):
        assert p.peak(dtype) > 0
    # matrix units: half precision at least 2x float32 on every card listed
    assert p.peak("bfloat16") >= 2 * p.peak("float32")
    assert p.vector_flops > 0 and p.memory_bandwidth > 0 and p.memory_bytes >= 16e9
    assert p.devices_per_node >= 1 and p.intra_node_bandwidth > 0 and p.inter_node_bandwidth > 0
    assert p.intra_node_link and p.node and not p.measured
    # a node's network is slower than the links inside it, and both slower than memory
    assert p.inter_node_bandwidth < p.intra_node_bandwidth < p.memory_bandwidth


# figures quoted from the datasheets: (profile, dtype, TFLOP/s as printed, printed with sparsity?)
DATASHEET = [
    ("h100-sxm", "bfloat16", 1979, True), ("h100-sxm", "float8_e4m3fn", 3958, True),
    ("h100-sxm", "float32", 67, False), ("h100-pcie", "float16", 1513, True),
    ("h200", "bfloat16", 1979, True), ("a100-40gb", "bfloat16", 312, False),
    ("a100-80gb", "int8", 624, False), ("l4", "float16", 242, True), ("l40s", "float8_e4m3fn", 733, False),
    ("a10", "bfloat16", 125, False), ("rtx4090", "bfloat16", 165.2, False), ("mi300x", "bfloat16", 1307.4, False),
    ("mi300x", "float8_e4m3fnuz", 2614.9, False),
]


@pytest.mark.parametrize("name,dtype,tflops,sparse", DATASHEET)
def test_peaks_are_the_dense_datasheet_figures(name, dtype, tflops, sparse):
    dense = tflops / 2 if sparse else tflops
    assert hardware.get(name).peak(dtype) == pytest.approx(dense * 1e12, rel=1e-3)


@pytest.mark.parametrize("name,tb_per_s,gb", [("h100-sxm", 3.35, 80), ("h100-pcie", 2.0, 80), ("h200", 4.8, 141),
                                              ("a100-40gb", 1.555, 40), ("a100-80gb", 2.039, 80), ("l4", 0.3, 24),
                                              ("l40s", 0.864, 48), ("a10", 0.6, 24), ("rtx4090", 1.008, 24),
                                              ("mi300x", 5.3, 192)])
def test_memory_figures_are_the_datasheets(name, tb_per_s, gb):
    p = hardware.get(name)
    assert p.memory_bandwidth == pytest.approx(tb_per_s * 1e12)
    assert p.memory_bytes == gb * 10 ** 9


def test_h100_ridge_point_is_about_295_flop_per_byte():
    # the figure LLM-inference analyses quote for H100 SXM in bf16: 989 TFLOP/s over 3.35 TB/s
    assert hardware.get("h100-sxm").ridge("bfloat16") == pytest.approx(295, abs=1)


def test_nvlink_figures_are_per_direction():
    # "NVLink: 900 GB/s" (H100 SXM) and "600 GB/s" (A100) count both directions
    assert hardware.get("h100-sxm").intra_node_bandwidth == 450e9
    assert hardware.get("a100-80gb").intra_node_bandwidth == 300e9
    assert hardware.get("h100-sxm").inter_node_bandwidth == 400e9 / 8  # one 400 Gb/s NIC per GPU


def test_dtypes_without_units_run_on_the_next_wider_ones():
    a100 = hardware.get("a100-80gb")
    assert a100.peak("float8_e4m3fn") == a100.peak("float16")  # no float8 tensor cores on Ampere
    assert a100.peak("int4") == a100.peak("int8")
    assert hardware.get("a10").peak("uint4") == 500e12       # the A10 lists INT4
    assert a100.peak("int64") == a100.peak("float32")        # no matrix units for int64
    with pytest.raises(FlopcountError, match="'l4' has no figure for float64"):
        hardware.get("l4").peak("float64")                   # its datasheet gives no FP64 rate


def test_unknown_names_suggest_the_closest():
    with pytest.raises(FlopcountError, match=r"unknown hardware 'h100'; did you mean .*h100-sxm"):
        hardware.get("h100")
    assert hardware.get("H100_SXM") is hardware.get("h100-sxm")


def test_the_cpu_profile_is_measured_once_per_process():
    cpu = hardware.get("cpu")
    assert cpu is hardware.get("cpu")
    assert cpu.measured and cpu.devices_per_node == 1
    assert cpu.peak("float32") > 0 and cpu.vector_flops > 0 and cpu.memory_bandwidth > 0
    assert cpu.peak("bfloat16") == cpu.peak("float32")  # numpy computes bfloat16 widened to float32
    assert cpu.memory_bytes > 0


def test_with_replaces_figures_and_keeps_the_rest():
    base = hardware.get("l40s")
    cluster = base.with_(inter_node_bandwidth=400e9 / 8 * 8 / 8)
    assert cluster.inter_node_bandwidth == 50e9 and cluster.peak("bfloat16") == base.peak("bfloat16")
    assert base.inter_node_bandwidth != 50e9
