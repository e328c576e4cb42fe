"""The ``flopcount`` command line (console script ``flopcount`` -> ``flopcount.cli:main``).

| module | job |
| --- | --- |
| ``app.py`` | the commands: ``flopcount [profile] MODEL``, ``compare``, ``diff``, ``models``, ``hardware`` |
| ``group.py`` | the default-command group; errors -> one line on stderr and an exit code |
| ``options.py`` | the options every profiling command shares, each a keyword argument of ``flopcount.profile``; errors' options as flags |
| ``inputs.py`` | ``--input-shape``, ``--input-value``, ``--dtype``, ``--factory-arg`` as text |
| ``phases.py`` | ``--prefill``, ``--decode``, ``--generate``: LLM phases through ``flopcount.llm`` |
| ``render.py`` | reports in each format, to stdout or atomically to a file |
| ``compare.py``, ``diff.py`` | two reports side by side; what changed from one to the other |
| ``progress.py`` | the delayed progress bar on stderr |
"""

from .app import main

__all__ = ["main"]
