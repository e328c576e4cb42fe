"""Reading JSON from a file that may be crafted: nesting too deep for Python's parser is one more
kind of malformed JSON, not a crash.

    header = parse_json(raw)          # json.loads, or a ValueError
    parse_json("[" * 100000 + "]" * 100000)   # NestedTooDeeply (a ValueError), not RecursionError

``json.loads`` gives up on deep nesting with a RecursionError (about 1,000 levels in CPython)
before it allocates anything large. No file flopcount reads nests that deep, so the error says
the text is not what it claims to be, in the same ``except ValueError`` as any other bad JSON.
"""

from __future__ import annotations

import json


class NestedTooDeeply(ValueError):
    """JSON text nested deeper than Python's parser follows."""


def parse_json(text: str | bytes):
    """``json.loads(text)``; a NestedTooDeeply (a ValueError) where the nesting is too deep to read.

    >>> parse_json('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> try:
    ...     parse_json("[" * 100000 + "]" * 100000)
    ... except ValueError as exc:
    ...     print(exc)
    JSON nested too deeply to read (200000 characters)
    """
    try:
        return json.loads(text)
    except (RecursionError, MemoryError):
        raise NestedTooDeeply(f"JSON nested too deeply to read ({len(text)} characters)") from None


__all__ = ["parse_json", "NestedTooDeeply"]
