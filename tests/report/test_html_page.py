"""The html page in a real browser: the system's Chromium, headless, driven over the DevTools
protocol (``headless_chromium.py``), with no network. One browser for the module; every check
goes through the page as a reader uses it (real clicks and keystrokes), and the numbers it shows
are compared with the JSON report's. Skipped where no Chromium is installed.

``FLOPCOUNT_SCREENSHOTS=docs/images pytest tests/report/test_html_page.py`` also saves the README's
screenshots there."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")

import flopcount  # noqa: E402
from flopcount.report import macs_to_string  # noqa: E402
from flopcount.report.model import OpRecord, Report, Row  # noqa: E402
from headless_chromium import Browser, find_chromium  # noqa: E402

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="no Chromium on this machine")
SHOTS = os.environ.get("FLOPCOUNT_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def resnet18():
    return flopcount.profile("resnet18", hardware="a100-80gb")


@pytest.fixture(scope="module")
def pages(tmp_path_factory, resnet18):
    folder = tmp_path_factory.mktemp("pages")
    path = folder / "resnet18.html"
    resnet18.to_html(path)
    return {"resnet18": path.as_uri(), "folder": folder}


def shoot(browser, name: str, folder) -> None:
    """A screenshot, in docs/ when asked for (the README's), else next to the pages."""
    target = pathlib.Path(SHOTS) if SHOTS else pathlib.Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"html-{name}.png"
    browser.screenshot(path)
    assert path.stat().st_size > 10_000   # a drawn page, not a blank one


def visible_rows(browser) -> list:
    return browser.evaluate("[...document.querySelectorAll('#tree-table tbody tr[data-row]')].map(r => +r.dataset.row)")


def test_the_page_draws_with_no_console_error_and_fetches_nothing(browser, pages):
    browser.open(pages["resnet18"])
    for tab in ("graph", "roofline", "tree"):
        browser.click(f"#tab-{tab}")
    assert browser.errors() == []
    assert browser.requests == [pages["resnet18"]]   # the file itself, nothing else
    assert browser.evaluate("document.querySelectorAll('script[src], link[href], img[src]').length") == 0
    # no timeline without measured times: its tab says why
    assert "--latency" in browser.evaluate("document.querySelector('#tab-timeline').title")


def test_the_tree_shows_the_json_reports_numbers(browser, pages, resnet18):
    browser.open(pages["resnet18"])
    browser.click("#tree-expand-all")
    rows = resnet18.to_dict()["rows"]
    assert sorted(visible_rows(browser)) == list(range(len(rows)))
    for column in ("params", "macs", "flops", "bytes_read", "bytes_written", "roofline_ms"):
        shown = browser.evaluate(f"""Object.fromEntries([...document.querySelectorAll('#tree-table td[data-col="{column}"]')]
            .map(td => [td.parentNode.dataset.row, td.dataset.v]))""")
        assert {int(k): float(v) for k, v in shown.items()} == pytest.approx({i: r[column] for i, r in enumerate(rows)})
    # and as the terminal table prints them
    text = browser.evaluate("""document.querySelector('#tree-table tr[data-row="0"] td[data-col="macs"]').textContent""")
    assert text == macs_to_string(resnet18.macs)


def test_expand_collapse_sort_search_and_filter_by_clicks(browser, pages, resnet18):
    browser.open(pages["resnet18"])
    children = [r.name for r in resnet18.children("")] or [r.name for r in resnet18.rows if r.depth == 1]
    browser.click('#tree-table tr[data-row="0"] .caret')          # collapse the model
    assert visible_rows(browser) == [0]
    browser.click('#tree-table tr[data-row="0"] .caret')          # and open it again
    assert len(visible_rows(browser)) > len(children)
    browser.click('#tree-collapse-all')
    browser.click('#tree-table tr[data-row="0"] .caret')
    browser.click('#tree-table th[data-key="macs"]')              # largest first
    shown = visible_rows(browser)[1:]
    macs = [resnet18.rows[i].macs for i in shown]
    assert macs == sorted(macs, reverse=True) and len(shown) == len(children)
    browser.click('#tree-table th[data-key="macs"]')              # again: smallest first
    macs = [resnet18.rows[i].macs for i in visible_rows(browser)[1:]]
    assert macs == sorted(macs)
    # the search box opens the tree down to the match and marks it
    browser.type("#tree-search", "layer3.1.conv2")
    target = [i for i, r in enumerate(resnet18.rows) if "layer3.1.conv2" in r.name]
    assert browser.evaluate("+document.querySelector('#tree-table tr.hit').dataset.row") == target[0]
    assert browser.evaluate("document.querySelector('#tree-search-count').textContent") == f"1 of {len(target)}"
    # clicking a module shows its ops in the panel
    browser.click(f'#tree-table tr[data-row="{target[0]}"] td[data-col=type]')
    assert browser.evaluate("!document.querySelector('#panel').hidden")
    ops = [o for o in resnet18.ops if o.scope == "layer3.1.conv2"]
    assert browser.evaluate("[...document.querySelectorAll('#panel tr.oplink')].map(r => r.children[1].textContent)") == \
        [o.name for o in ops]
    # the filter keeps the matches and their ancestors
    browser.type("#tree-filter", "batchnorm")
    kept = visible_rows(browser)
    matches = {i for i, r in enumerate(resnet18.rows) if "batchnorm" in r.type.lower() or "batchnorm" in r.name.lower()}
    assert matches <= set(kept) and all(i in matches or resnet18.rows[i].kind != "op" for i in kept)


def test_a_graph_node_panel_shows_shapes_dtypes_attrs_and_costs(browser, pages, resnet18):
    browser.open(pages["resnet18"] + "#graph")
    conv = next(o for o in resnet18.ops if o.op == "conv")
    k = browser.evaluate(f"FC.graphView.state.items.findIndex(it => it.op >= 0 && FC.model.ops.name[it.op] === {json.dumps(conv.name)})")
    assert k >= 0
    browser.click(f'#graph-svg .gnode[data-item="{k}"] rect.box')
    panel = browser.evaluate("document.querySelector('#panel').innerText")
    assert conv.name in panel and "stride" in panel and "float32" in panel
    assert "x".join(map(str, conv.output_shapes[0])) in panel
    assert macs_to_string(conv.macs) in panel
    shoot(browser, "graph", pages["folder"])
    # "Show in tree" finds the op's module
    browser.click("#panel .actions button")
    assert browser.evaluate("FC.current") == "tree"
    names = [r.name for r in resnet18.rows]   # a graph's op has a row of its own under its module
    assert browser.evaluate("+document.querySelector('#tree-table tr.selected').dataset.row") == names.index(conv.name)


def test_a_roofline_point_opens_its_op(browser, pages):
    browser.open(pages["resnet18"] + "#roofline")
    browser.click("#roofline-chart .roof-point")
    assert browser.evaluate("document.querySelector('#panel').dataset.op") is not None
    shoot(browser, "roofline", pages["folder"])


def test_the_tree_screenshot(browser, pages):
    browser.open(pages["resnet18"])
    shoot(browser, "tree", pages["folder"])


def _decoder_like_report(layers: int = 32, ops_per_layer: int = 320) -> Report:
    """A report of ``layers`` x ``ops_per_layer`` chained ops in 4 blocks per layer: the size of a
    32-layer decoder's op graph, built directly (the page reads only the report's records)."""
    rows, ops = [Row(name="model", type="Decoder", depth=0, kind="scope")], []
    value = "x"
    for layer in range(layers):
        rows.append(Row(name=f"layers.{layer}", type="Layer", depth=1, parent="", kind="scope"))
        for block in range(4):
            scope = f"layers.{layer}.block{block}"
            rows.append(Row(name=scope, type="Block", depth=2, parent=f"layers.{layer}", kind="scope"))
            for k in range(ops_per_layer // 4):
                name = f"{scope}/add_{k}"
                ops.append(OpRecord(name=name, op="add", scope=scope, phase="forward", macs=0, flops=64,
                                    bytes_read=512, bytes_written=256, params=0, param_bytes=0,
                                    input_shapes=((1, 64), (1, 64)), input_dtypes=("float32", "float32"),
                                    output_shapes=((1, 64),), output_dtypes=("float32",), counted=True,
                                    inputs=(value, "x"), outputs=(name,), attrs={}))
                value = name
    return Report(rows, convention="flopcount", mode="graph", device="meta", ops=ops, model="decoder-like")


def test_a_ten_thousand_node_graph_draws_its_collapsed_modules_first(browser, tmp_path):
    report = _decoder_like_report()
    assert len(report.ops) >= 10_000
    path = tmp_path / "big.html"
    report.to_html(path)
    browser.open(path.as_uri() + "#graph")
    browser.wait("FC.timings.graphFirstPaint !== undefined")
    # measured in the page: from the start of the graph's build to its first painted frame
    assert browser.evaluate("FC.timings.graphFirstPaint") < 2000
    drawn = browser.evaluate("document.querySelectorAll('#graph-svg .gnode').length")
    assert 0 < drawn <= 200   # modules, not ten thousand nodes
    # opening one module draws its parts
    browser.click('#graph-svg .gnode.group .toggle')
    assert browser.evaluate("document.querySelectorAll('#graph-svg .gnode').length") > drawn
    assert browser.errors() == []


def test_the_timeline_draws_the_chrome_traces_slices(browser, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    report = flopcount.profile(model, input_shape=(2, 16), latency=True, repeat=2, warmup=1)
    path = tmp_path / "timed.html"
    report.to_html(path, timeline=True)
    browser.open(path.as_uri() + "#timeline")
    slices = [e for e in report.chrome_trace()["traceEvents"] if e.get("ph") == "X"]
    assert browser.evaluate("FC.timelineView.slices.n") == len(slices)
    assert browser.evaluate("FC.timelineView.slices.dur") == pytest.approx([e["dur"] for e in slices])
    assert browser.errors() == []


def test_the_diff_page_marks_the_changed_and_added_rows(browser, tmp_path):
    a = flopcount.profile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), input_shape=(1, 8))
    b = flopcount.profile(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)),
                          input_shape=(1, 8))
    d = a.diff(b)
    from flopcount.report.page import diff_page

    path = tmp_path / "diff.html"
    path.write_text(diff_page(d))
    browser.open(path.as_uri())
    browser.click("#compare-only")
    for status in ("changed", "added", "removed"):
        shown = browser.evaluate(f"document.querySelectorAll('#compare-b tr[data-status={status}], "
                                 f"#compare-a tr[data-status={status}]').length")
        assert shown == d.count(status) * (2 if status == "changed" else 1), status
    assert browser.errors() == []


def test_an_llm_phase_has_a_tab_per_step(browser, tmp_path):
    from flopcount import llm
    from flopcount.report.page import document_page

    report = llm.profile("gpt2", llm.parse_phase(prefill=None, decode=True, context=16, generate=None))
    doc = report.to_dict()
    path = tmp_path / "phase.html"
    path.write_text(document_page("phase", doc, "gpt2 decode"))
    browser.open(path.as_uri())
    browser.click("#tab-doc-decode")
    groups = doc["decode"]["groups"]
    shown = browser.evaluate("[...document.querySelectorAll('#doc-decode-groups-table tbody tr')].length")
    assert shown == len(groups)
    browser.click("#doc-decode-groups-table th[data-key=macs]")
    first = browser.evaluate("document.querySelector('#doc-decode-groups-table tbody tr td').textContent")
    assert first == max(groups, key=lambda g: g["macs"])["name"]
    assert browser.errors() == []
