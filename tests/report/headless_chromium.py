"""A small Chrome DevTools protocol client: the system's Chromium, headless, driven over
``--remote-debugging-pipe`` (JSON messages ended by a NUL byte on file descriptors 3 and 4), so
no port is opened and no package is needed. Network access is cut: the browser starts with its
background services off, and every request a page makes is recorded so tests can check that
nothing was fetched."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    """The Chromium executable (``$CHROMIUM``, else chromium or chrome on the PATH), or None."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """One headless Chromium and one page (tab) in it.

    >>> with Browser() as b:                                   # doctest: +SKIP
    ...     b.open("file:///tmp/report.html")
    ...     b.evaluate("document.title")
    """

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 900):
        self.executable = executable or find_chromium()
        self.width, self.height = width, height
        self.console: list = []     # (level, text) of console messages, exceptions and log entries
        self.requests: list = []    # the URLs the page asked for

    def __enter__(self) -> "Browser":
        self.profile = tempfile.mkdtemp(prefix="flopcount-chromium-")
        to_browser, self._send_fd = os.pipe()
        self._read_fd, from_browser = os.pipe()

        def wire():  # the protocol's descriptors: 3 the browser reads, 4 it writes
            # moved up first: a pipe's own descriptor may be 3 or 4 already
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]
            for fd, target in zip(high, (3, 4)):
                os.dup2(fd, target, inheritable=True)

        self.process = subprocess.Popen([self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._next_id, self._events = b"", 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._send_fd, self._read_fd):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    # --- the protocol ------------------------------------------------------------------
    def _message(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self._read_fd], [], [], 0.5)
            if ready:
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    raise ConnectionError("Chromium closed the protocol pipe")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _record(self, event: dict) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append((params.get("type"), text))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.console.append(("exception", details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded":
            self.console.append((params["entry"]["level"], params["entry"]["text"]))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def call(self, method: str, session: bool = False, timeout: float = 30, **params) -> dict:
        """Send one command (to the page's session when ``session``) and return its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._message(timeout)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._record(answer)

    # --- what tests do -------------------------------------------------------------------
    def open(self, url: str, ready: str = "window.flopcount && window.flopcount.ready", timeout: float = 30) -> None:
        """Load ``url`` and wait until ``ready`` (a JS expression) is true."""
        self.console.clear()
        self.requests.clear()
        # from a blank page: a new fragment alone would not load the page again
        self.call("Page.navigate", session=True, url="about:blank")
        self.wait("document.readyState === 'complete' && location.href === 'about:blank'", timeout)
        self.call("Page.navigate", session=True, url=url)
        self.wait(ready, timeout)

    def wait(self, expression: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression} stayed false; console: {self.console}")
            time.sleep(0.05)

    def evaluate(self, expression: str):
        """The value of a JS expression in the page (JSON values only)."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real left click (mouse pressed and released) at the middle of the element."""
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: 'center', inline: 'center'}});
            const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise LookupError(f"no element matches {selector}")
        self.click_at(*box)

    def click_at(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left",
                      clickCount=0 if kind == "mouseMoved" else 1)

    def type(self, selector: str, text: str) -> None:
        """Click into a text box and type ``text``, as keystrokes insert it."""
        self.click(selector)
        self.call("Input.insertText", session=True, text=text)

    def press(self, key: str, code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", session=True, type=kind, key=key, code=key,
                      windowsVirtualKeyCode=code, nativeVirtualKeyCode=code)

    def screenshot(self, path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def errors(self) -> list:
        """Console errors, uncaught exceptions and error log entries so far."""
        return [(level, text) for level, text in self.console if level in ("error", "exception", "assert")]
