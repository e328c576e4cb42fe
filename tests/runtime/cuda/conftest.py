"""The NVRTC tests say how many sources they compiled, at the end of the run."""

from collections import Counter

import cuda_compile


def pytest_terminal_summary(terminalreporter):
    compiled = cuda_compile.COMPILED
    if not compiled:
        return
    kinds, archs = Counter(), Counter()
    for (kind, arch), n in compiled.items():
        kinds[kind] += n
        archs[arch] += n
    terminalreporter.write_line(
        f"NVRTC compiled {sum(compiled.values())} CUDA kernel variants: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) + "; "
        + ", ".join(f"{n} for {arch}" for arch, n in sorted(archs.items())))
