"""The tests' import of the PyTorch ecosystem goes through the same remedy as the command's:
``flopcount.runtime.torch.environment.prepare`` (its docstring explains torchvision's CUDA-build
quirk beside a CPU torch)."""

from __future__ import annotations

from flopcount.runtime.torch.environment import prepare

__all__ = ["prepare"]
