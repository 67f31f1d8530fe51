"""
The explorer served and opened as a student would, for its test, its timings and its screenshot: `serve` runs
`python -m explorer` in a child process on 127.0.0.1 and stops it; `page` opens it in Debian's chromium through
playwright (playwright's own browser download is not needed). Nothing leaves the machine: the browser's requests
to any host but 127.0.0.1 are refused and counted.
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"  # Debian's: apt-get install chromium
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(*flags, timeout=180):
    """`python -m explorer --port N *flags` from the repository root; yields (url, log), log a function that
    returns what the server printed so far. The server is stopped (SIGTERM, then SIGKILL) on the way out."""
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-m", "explorer", "--port", str(port), *flags], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def printed():
        log.seek(0)
        return log.read()
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the explorer exited with {proc.returncode}:\n{printed()[-2000:]}")
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the explorer did not answer in {timeout} s:\n{printed()[-2000:]}") from None
                time.sleep(0.3)
        yield url, printed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and anything it started
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


@contextlib.contextmanager
def page(url, width=1400, height=1100, ready="#stamp", timeout=300):
    """A chromium page at `url`, loaded, once `ready` (a CSS selector) shows: by default the first sentence's
    figures, which on a first start come after the tutorial's model is built (about 70 s; `timeout` seconds at
    most). Yields (page, refused), refused the list of outside URLs it asked for."""
    from playwright.sync_api import sync_playwright
    refused = []

    def loopback_only(route):
        if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
            return route.continue_()
        refused.append(route.request.url)
        return route.abort()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            p = browser.new_page(viewport={"width": width, "height": height})
            p.route("**/*", loopback_only)
            p.goto(url)
            p.wait_for_selector(ready, timeout=timeout * 1000)
            yield p, refused
        finally:
            browser.close()


def shown(p, timeout=60):
    """What the page shows once it has answered the last change: the stamp's text, waiting out IGA's status."""
    p.wait_for_function("() => !document.querySelector('.generating, .pending')", timeout=timeout * 1000)
    return p.inner_text("#stamp")


def set_value(p, elem_id, value):
    """Type `value` into a control (a slider's number box, a textbox, the seed) and commit it as a user does."""
    box = p.locator(f"#{elem_id} input[type=number], #{elem_id} textarea, #{elem_id} input[type=text]").first
    box.fill(str(value))
    box.press("Enter")


def screenshot(path, width=1280):
    """A full-page PNG of the explorer as it opens (the walkthrough's sentence), in 256 colours (a third of the
    bytes)."""
    import io
    import PIL.Image
    with serve() as (url, _), page(url, width=width) as (p, _):
        png = p.screenshot(full_page=True)
    PIL.Image.open(io.BytesIO(png)).convert("RGB").quantize(256).save(path, optimize=True)


if __name__ == "__main__":  # python explorer/browser.py explorer/screenshot.png
    sys.path.insert(0, str(ROOT))
    screenshot(sys.argv[1] if len(sys.argv) > 1 else "explorer/screenshot.png")
