"""Pictures: report.plot() figures (bars of the layers, a roofline of every op) and the
notebook's HTML table with its shares drawn as bars, rendered to files (and, where Debian's
headless Chromium is installed, photographed by it)."""

import html.parser
import os
import re
import shutil
import subprocess

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.report.html import html_page

matplotlib = pytest.importorskip("matplotlib")
nn = rt.nn


@pytest.fixture(scope="module")
def resnet18():
    return flopcount.profile("resnet18", hardware="a100-80gb")


def test_layer_bars_are_the_rows_numbers(resnet18):
    figure = resnet18.plot(kind="layers", depth=1)
    macs_ax, params_ax = figure.axes  # no latency panel: the report is not timed
    rows = [r for r in resnet18.rows if r.depth == 1]
    # bars top to bottom in table order: the first row has the highest y
    bars = sorted(macs_ax.patches, key=lambda p: -p.get_y())
    assert [p.get_width() for p in bars] == [r.macs for r in rows]
    ticks = sorted(macs_ax.get_yticklabels(), key=lambda t: -t.get_position()[1])
    assert [t.get_text() for t in ticks] == [r.name for r in rows]
    assert sorted(p.get_width() for p in params_ax.patches) == sorted(r.params for r in rows)


def test_a_timed_report_adds_a_latency_panel():
    report = flopcount.profile(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), rt.randn(2, 8), latency=True,
                               repeat=1, warmup=0)
    figure = report.plot(kind="layers")
    assert [ax.get_title().split(" ")[0] for ax in figure.axes] == ["MACs", "Params", "Latency"]
    widths = sorted(p.get_width() for p in figure.axes[2].patches)
    assert widths == sorted(r.latency_ms for r in report.rows if r.depth == 1)


def test_roofline_has_every_op_under_the_profiles_roofs(resnet18):
    figure = resnet18.plot(kind="roofline")
    ax = figure.axes[0]
    points = [tuple(xy) for collection in ax.collections for xy in collection.get_offsets()]
    ops = [o for o in resnet18.by_op("forward") if o.flops and o.bytes_read + o.bytes_written]
    assert len(points) == len(ops)
    profile = resnet18.hardware
    roof = ax.lines[0]
    assert max(roof.get_ydata()) == pytest.approx(profile.peak("float32"))
    for x, y in points:  # estimated from the roofline: on or under the roofs
        assert y <= max(profile.peak("float32"), profile.vector_flops) * 1.000001
        assert y <= profile.memory_bandwidth * x * 1.000001
    assert "estimated" in ax.get_ylabel()


def test_plots_are_written_by_extension_and_refused_otherwise(resnet18, tmp_path):
    svg, png = tmp_path / "r.svg", tmp_path / "r.png"
    resnet18.plot(path=str(svg))
    resnet18.plot(kind="layers", path=str(png))
    assert "<svg" in svg.read_text()[:500]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(flopcount.FlopcountError, match="must end in"):
        resnet18.plot(path=str(tmp_path / "r.txt"))


class _Cells(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self._style = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._style = dict(attrs).get("style", "")

    def handle_data(self, data):
        if self._style is not None and self.rows:
            self.rows[-1].append((data, self._style))
            self._style = None


def test_the_notebook_table_draws_shares_as_bars(resnet18, tmp_path):
    page = html_page(resnet18, depth=1)
    path = tmp_path / "report.html"
    path.write_text(page)
    parser = _Cells()
    parser.feed(path.read_text())
    header = [text for text, _ in parser.rows[0]]
    column = header.index("MACs %")
    for row, (cells, name) in zip([r for r in resnet18.rows if r.depth <= 1], zip(parser.rows[1:], header)):
        text, style = cells[column]
        share = 100 * row.macs / resnet18.macs
        assert text == f"{share:.2f}%"
        assert re.search(rf"{share:.2f}%,transparent {share:.2f}%", style), style
    assert "Input shape" in header and "1x3x224x224" in page


@pytest.mark.skipif(not shutil.which("chromium-headless-shell"), reason="Debian's headless Chromium is not installed")
def test_chromium_draws_the_notebook_view(resnet18, tmp_path):
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(html_page(resnet18, depth=1))
    subprocess.run(["chromium-headless-shell", "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,400", f"--screenshot={png}",
                    f"file://{page}"], check=True, capture_output=True, timeout=120)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10_000
