"""Accelerators from their vendors' datasheets, each figure with its source.

Conventions (see ``Profile``): dense FLOP/s (a headline quoted "with sparsity" is halved, and
the comment says so); ``float32`` is the FP32 rate (not TF32); memory in the vendor's decimal
GB; link bandwidths per device and per direction (a bidirectional figure is halved). Node
figures come from the vendor's reference system where there is one (DGX), else from the
system named in ``node``.
"""

from __future__ import annotations

from .profile import Profile

T = 1e12          # TFLOP/s
GB = 1e9          # bytes (vendors' GB are decimal)
GBIT = 1e9 / 8    # a network's Gb/s in bytes/s

PCIE4_X16 = 32 * GB   # 64 GB/s both directions (PCI-SIG: 16 GT/s x 16 lanes, 128b/130b)
PCIE5_X16 = 64 * GB   # 128 GB/s both directions (the H100/H200 datasheets' "PCIe Gen5: 128 GB/s")

# A node whose vendor publishes none (PCIe cards): 8 cards that reach each other over PCIe and
# share one 100 Gb/s Ethernet port. An assumption, stated as such; replace it with
# ``profile.with_(inter_node_bandwidth=...)`` for a real cluster.
ASSUMED_PCIE_NODE = "assumed: 8 cards on PCIe, one 100 Gb/s Ethernet port per node"
_PCIE4_NODE = dict(intra_node_bandwidth=PCIE4_X16, inter_node_bandwidth=100 * GBIT / 8, devices_per_node=8,
                   intra_node_link="PCIe 4.0 x16", node=ASSUMED_PCIE_NODE)  # the port shared by 8 cards


def _dgx(gpus: int, nvlink_both_directions: float, nic_gbit: float) -> dict:
    return dict(intra_node_bandwidth=nvlink_both_directions / 2, inter_node_bandwidth=nic_gbit * GBIT,
                devices_per_node=gpus)


PROFILES = (
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), H100 SXM column:
    # FP64 34, FP64 Tensor Core 67, FP32 67 TFLOPS; TF32 989, BF16 1,979, FP16 1,979, FP8 3,958
    # TFLOPS and INT8 3,958 TOPS "with sparsity" (dense: half); 80 GB, 3.35 TB/s; NVLink 900 GB/s.
    # Node: DGX H100 datasheet: 8 GPUs, 8 x ConnectX-7 400 Gb/s (one per GPU) for the cluster.
    Profile("h100-sxm", "NVIDIA H100 SXM5 80GB",
            peak_flops={"float64": 67 * T, "float32": 67 * T, "tf32": 494.5 * T, "bfloat16": 989.5 * T,
                        "float16": 989.5 * T, "float8": 1979 * T, "int8": 1979 * T},
            vector_flops=67 * T, memory_bandwidth=3.35e12, memory_bytes=80 * GB,
            **_dgx(8, 900 * GB, 400), intra_node_link="NVLink 4", node="DGX H100"),
    # Same datasheet, H100 PCIe column: FP64 26, FP64 TC 51, FP32 51; TF32 756, BF16 1,513, FP16
    # 1,513, FP8 3,026, INT8 3,026 with sparsity (dense: half); 80 GB, 2 TB/s; "NVLink: 600 GB/s"
    # joins two cards (a bridge), so a node of eight talks over PCIe Gen5 (128 GB/s).
    Profile("h100-pcie", "NVIDIA H100 PCIe 80GB",
            peak_flops={"float64": 51 * T, "float32": 51 * T, "tf32": 378 * T, "bfloat16": 756.5 * T,
                        "float16": 756.5 * T, "float8": 1513 * T, "int8": 1513 * T},
            vector_flops=51 * T, memory_bandwidth=2.0e12, memory_bytes=80 * GB,
            intra_node_bandwidth=PCIE5_X16, inter_node_bandwidth=100 * GBIT / 8, devices_per_node=8,
            intra_node_link="PCIe 5.0 x16", node=ASSUMED_PCIE_NODE),
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), H200 SXM column:
    # FP64 34, FP64 TC 67, FP32 67; TF32 989, BF16 1,979, FP16 1,979, FP8 3,958, INT8 3,958 with
    # sparsity (dense: half); 141 GB HBM3e, 4.8 TB/s; NVLink 900 GB/s.
    # Node: DGX H200 datasheet: 8 GPUs, 8 x ConnectX-7 400 Gb/s.
    Profile("h200", "NVIDIA H200 SXM 141GB",
            peak_flops={"float64": 67 * T, "float32": 67 * T, "tf32": 494.5 * T, "bfloat16": 989.5 * T,
                        "float16": 989.5 * T, "float8": 1979 * T, "int8": 1979 * T},
            vector_flops=67 * T, memory_bandwidth=4.8e12, memory_bytes=141 * GB,
            **_dgx(8, 900 * GB, 400), intra_node_link="NVLink 4", node="DGX H200"),
    # NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100): FP64 9.7, FP64
    # TC 19.5, FP32 19.5; TF32 156, BF16 312, FP16 312 TFLOPS, INT8 624 TOPS dense (the sparse
    # figures, twice these, are marked *); A100 40GB: 1,555 GB/s; NVLink 600 GB/s.
    # Node: DGX A100 datasheet: 8 GPUs, 8 x ConnectX-6 200 Gb/s HDR InfiniBand.
    Profile("a100-40gb", "NVIDIA A100 SXM4 40GB",
            peak_flops={"float64": 19.5 * T, "float32": 19.5 * T, "tf32": 156 * T, "bfloat16": 312 * T,
                        "float16": 312 * T, "int8": 624 * T},
            vector_flops=19.5 * T, memory_bandwidth=1.555e12, memory_bytes=40 * GB,
            **_dgx(8, 600 * GB, 200), intra_node_link="NVLink 3", node="DGX A100"),
    # Same datasheet, A100 80GB SXM: 2,039 GB/s; compute as the 40GB card.
    Profile("a100-80gb", "NVIDIA A100 SXM4 80GB",
            peak_flops={"float64": 19.5 * T, "float32": 19.5 * T, "tf32": 156 * T, "bfloat16": 312 * T,
                        "float16": 312 * T, "int8": 624 * T},
            vector_flops=19.5 * T, memory_bandwidth=2.039e12, memory_bytes=80 * GB,
            **_dgx(8, 600 * GB, 200), intra_node_link="NVLink 3", node="DGX A100 (80GB)"),
    # NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4): FP32 30.3 TFLOPS;
    # TF32 120, FP16 242, BF16 242, FP8 485 TFLOPS, INT8 485 TOPS with sparsity (dense: half);
    # 24 GB GDDR6, 300 GB/s; PCIe Gen4 x16. No FP64 figure.
    Profile("l4", "NVIDIA L4 24GB",
            peak_flops={"float32": 30.3 * T, "tf32": 60 * T, "bfloat16": 121 * T, "float16": 121 * T,
                        "float8": 242.5 * T, "int8": 242.5 * T},
            vector_flops=30.3 * T, memory_bandwidth=300 * GB, memory_bytes=24 * GB, **_PCIE4_NODE),
    # NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s): FP32 91.6 TFLOPS; TF32 183,
    # BF16 362.05, FP16 362.05, FP8 733 TFLOPS, INT8 733 TOPS dense (1,466 etc. with sparsity);
    # 48 GB GDDR6, 864 GB/s; PCIe Gen4 x16. No FP64 figure.
    Profile("l40s", "NVIDIA L40S 48GB",
            peak_flops={"float32": 91.6 * T, "tf32": 183 * T, "bfloat16": 362.05 * T, "float16": 362.05 * T,
                        "float8": 733 * T, "int8": 733 * T},
            vector_flops=91.6 * T, memory_bandwidth=864 * GB, memory_bytes=48 * GB, **_PCIE4_NODE),
    # NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/products/a10-gpu): FP32
    # 31.2 TFLOPS; TF32 62.5, BF16 125, FP16 125 TFLOPS, INT8 250, INT4 500 TOPS dense (twice
    # that with sparsity); 24 GB GDDR6, 600 GB/s; PCIe Gen4 x16. No FP64 figure.
    Profile("a10", "NVIDIA A10 24GB",
            peak_flops={"float32": 31.2 * T, "tf32": 62.5 * T, "bfloat16": 125 * T, "float16": 125 * T,
                        "int8": 250 * T, "int4": 500 * T},
            vector_flops=31.2 * T, memory_bandwidth=600 * GB, memory_bytes=24 * GB, **_PCIE4_NODE),
    # NVIDIA Ada GPU architecture whitepaper (v2.1), Appendix A, GeForce RTX 4090: FP32 82.6
    # TFLOPS; tensor TFLOPS dense/sparse: FP16 and BF16 with FP32 accumulate 165.2/330.4 (FP16
    # accumulate, which PyTorch does not use, 330.3/660.6), TF32 82.6/165.2, FP8 with FP32
    # accumulate 330.3/660.6, INT8 660.6/1321.2 TOPS, INT4 1321.2/2642.4 TOPS; 24 GB GDDR6X,
    # 1,008 GB/s. No NVLink.
    Profile("rtx4090", "NVIDIA GeForce RTX 4090 24GB",
            peak_flops={"float32": 82.6 * T, "tf32": 82.6 * T, "bfloat16": 165.2 * T, "float16": 165.2 * T,
                        "float8": 330.3 * T, "int8": 660.6 * T, "int4": 1321.2 * T},
            vector_flops=82.6 * T, memory_bandwidth=1008 * GB, memory_bytes=24 * GB, **_PCIE4_NODE),
    # AMD Instinct MI300X accelerator data sheet (amd.com/en/products/accelerators/instinct/mi300/
    # mi300x): FP64 vector 81.7, FP64 matrix 163.4, FP32 vector 163.4, FP32 matrix 163.4; TF32
    # 653.7, FP16 1,307.4, BF16 1,307.4, FP8 2,614.9 TFLOPS, INT8 2,614.9 TOPS dense (twice that
    # with sparsity); 192 GB HBM3, 5.3 TB/s; 7 Infinity Fabric links of 128 GB/s (both
    # directions), one to each other GPU of an 8-GPU platform: 7 x 64 GB/s out of each GPU.
    # Its float8 is the fnuz kind (float8_e4m3fnuz, float8_e5m2fnuz).
    # Node: Azure ND MI300X v5 (learn.microsoft.com, ND-MI300X-v5 series): 8 GPUs, 8 x 400 Gb/s
    # InfiniBand.
    Profile("mi300x", "AMD Instinct MI300X 192GB",
            peak_flops={"float64": 163.4 * T, "float32": 163.4 * T, "tf32": 653.7 * T, "bfloat16": 1307.4 * T,
                        "float16": 1307.4 * T, "float8": 2614.9 * T, "int8": 2614.9 * T},
            vector_flops=163.4 * T, memory_bandwidth=5.3e12, memory_bytes=192 * GB,
            intra_node_bandwidth=7 * 64 * GB, inter_node_bandwidth=400 * GBIT, devices_per_node=8,
            intra_node_link="Infinity Fabric", node="Azure ND MI300X v5"),
)
