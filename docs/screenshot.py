"""Render a report's notebook view and plots to files and photograph the HTML with headless
Chromium (Debian's ``chromium-headless-shell`` or ``chromium``), for the README.

    python docs/screenshot.py                      # resnet18, timed, into docs/images/
    python docs/screenshot.py mobilenet_v2 --depth 2

Writes ``<model>_notebook.png`` (Chromium's screenshot of the page a notebook shows, from
``Report._repr_html_``) and ``<model>_plot.png`` (``report.plot()``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import flopcount  # noqa: E402
from flopcount.report.html import html_page  # noqa: E402

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("no headless Chromium found: apt-get install chromium-headless-shell (Debian) "
                     f"or put one of {', '.join(BROWSERS)} on PATH")


def screenshot(html_path: str, png_path: str, width: int, height: int) -> None:
    """A PNG of the page, as Chromium draws it, through its --screenshot mode."""
    with tempfile.TemporaryDirectory() as profile:
        command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   f"--screenshot={png_path}", "file://" + os.path.abspath(html_path)]
        subprocess.run(command, check=True, capture_output=True, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="resnet18")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(HERE, "images"))
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=380)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report = flopcount.profile(args.model, latency=True, repeat=3)
    base = os.path.join(args.out, args.model)
    with tempfile.TemporaryDirectory() as folder:
        page = os.path.join(folder, "report.html")
        with open(page, "w") as f:
            f.write(html_page(report, depth=args.depth))
        screenshot(page, base + "_notebook.png", args.width, args.height)
    report.plot(depth=args.depth, path=base + "_plot.png")
    print(f"wrote {base}_notebook.png, {base}_plot.png")


if __name__ == "__main__":
    main()
