"""One self-contained HTML page to explore a report: the module tree, the op graph, the
roofline and the timeline (``flopcount MODEL --format html``, ``report.to_html(path)``, a
notebook's rich display); a diff's two trees side by side; an LLM phase's or a training plan's
numbers in tabs. Everything is inlined: the file opens from disk with nothing fetched.

    >>> import flopcount
    >>> text = flopcount.profile("resnet18").to_html("resnet18.html")     # doctest: +SKIP
"""

from __future__ import annotations

from ...io_utils import atomic_write
from .build import iframe, page
from .data import diff_data, document_data, report_data


def report_page(report, timeline: bool | None = None) -> str:
    """The page of one report (``timeline``: see :func:`.data.report_data`)."""
    return page(report_data(report, timeline), f"{report.model or report.root.type}: flopcount report")


def diff_page(diff) -> str:
    """Two reports compared: their trees side by side, the differences marked."""
    doc = diff.to_dict()
    return page(diff_data(diff), f"{doc['a']} vs {doc['b']}: flopcount diff")


def document_page(what: str, doc: dict, title: str) -> str:
    """An LLM phase (``what="phase"``) or a training plan (``what="plan"``) in tabs."""
    return page(document_data(what, doc), title)


def write_page(text: str, path) -> None:
    """``text`` to ``path``, atomically: a failed write leaves no half-written file."""
    atomic_write(path, text)


__all__ = ["report_page", "diff_page", "document_page", "write_page", "iframe"]
