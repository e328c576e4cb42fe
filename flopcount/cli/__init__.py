"""The ``flopcount`` command line (console script ``flopcount`` -> ``flopcount.cli:main``).

| module | job |
| --- | --- |
| ``app.py`` | the commands: ``flopcount [profile] MODEL``, ``models``, ``compare`` |
| ``group.py`` | the default-command group; errors -> one line on stderr and an exit code |
| ``options.py`` | the options every profiling command shares, each a keyword argument of ``flopcount.profile``; errors' options as flags |
| ``inputs.py`` | ``--input-shape``, ``--dtype``, ``--factory-arg`` as text |
| ``render.py`` | reports in each format, to stdout or atomically to a file |
| ``compare.py`` | two reports side by side |
| ``progress.py`` | the delayed progress bar on stderr |
"""

from .app import main

__all__ = ["main"]
