"""The page itself: ``assets/page.html`` with the stylesheet, the scripts and the data inlined,
so the file opens from disk in any browser with nothing fetched (the page's Content-Security-
Policy forbids any request)."""

from __future__ import annotations

import html
import json
import re
from importlib import resources

from ...version import __version__

# the scripts in the order they build on each other; main.js starts the page
SCRIPTS = ("core.js", "model.js", "layout.js", "tree.js", "graph.js", "roofline.js", "timeline.js", "compare.js",
           "document.js", "main.js")


def asset(name: str) -> str:
    """The text of one file of ``assets/`` (shipped in the wheel as package data)."""
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def embedded_json(data) -> str:
    """``data`` as JSON that cannot end its ``<script>`` element early: every ``<`` escaped."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def page(data: dict, title: str) -> str:
    """The whole page for ``data`` (see :mod:`.data`)."""
    parts = {"title": html.escape(title), "version": __version__, "css": asset("page.css"),
             "js": "\n".join(asset(name) for name in SCRIPTS).replace("</script", "<\\/script"),
             "data": embedded_json(dict(data, title=title))}
    # one pass, so that nothing inserted is read again as a placeholder
    return re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], asset("page.html"))


def iframe(text: str, height: int = 640) -> str:
    """The page in an iframe (``srcdoc``): a notebook's rich display of it."""
    return (f'<iframe srcdoc="{html.escape(text, quote=True)}" style="width:100%;height:{height}px;border:1px solid '
            f'#ddd" sandbox="allow-scripts"></iframe>')


__all__ = ["asset", "embedded_json", "page", "iframe"]
