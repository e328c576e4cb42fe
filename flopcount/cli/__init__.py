"""The ``flopcount`` command line (console script ``flopcount`` -> ``flopcount.cli:main``).

| module | job |
| --- | --- |
| ``app.py`` | the commands: ``flopcount [profile] MODEL``, ``models``, ``compare`` |
| ``group.py`` | the default-command group; errors -> one line on stderr and an exit code |
| ``run.py`` | one run: load MODEL, make its inputs, call ``flopcount.profile`` |
| ``loading.py`` | what MODEL names (zoo, ONNX, native file, ``file.py:factory``) and loading it |
| ``inputs.py`` | ``--input-shape``, ``--dtype``, ``--batch``, ``--factory-arg`` and the input tensors |
| ``render.py`` | reports in each format, to stdout or atomically to a file |
| ``compare.py`` | two reports side by side |
| ``progress.py`` | the delayed progress bar on stderr |
"""

from .app import main

__all__ = ["main"]
