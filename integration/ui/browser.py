#!/usr/bin/env python3
"""Drive the page of `rwfs ui` in Debian's chromium through chromedriver's W3C WebDriver API.

    browser.py URL SCREENSHOT.png

URL is what `rwfs ui` printed (with the token). The workspace holds the scripted history of
tests/ui.rs: session `agent` rewrote src/f0..f4.txt and created src/new.txt. The script opens
the page, waits for the agent's rows in the timeline, saves a screenshot of it, opens
src/f1.txt's versions, their diff and the blame gutter, filters the timeline to the agent's session, previews
and confirms a rewind of that session from the page, and waits for the page to report it.
The caller checks the files on disk. Only the standard library: no WebDriver client package.
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["chromedriver", f"--port={self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while True:
            try:
                self.call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.time() > deadline:
                    raise SystemExit("chromedriver did not start")
                time.sleep(0.1)
        self.profile = tempfile.mkdtemp(prefix="rwfs-ui-chromium-")
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": shutil.which("chromium") or "/usr/bin/chromium",
                        "args": [
                            "--headless=new",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-dev-shm-usage",
                            "--window-size=1400,800",
                            f"--user-data-dir={self.profile}",
                        ],
                    },
                }
            }
        }
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"WebDriver {method} {path}: {e.read().decode(errors='replace')}") from None

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def find_all(self, css):
        found = self.s("POST", "/elements", {"using": "css selector", "value": css})
        return [next(iter(e.values())) for e in found]

    def wait_for(self, css, what, timeout=20, text=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for element in self.find_all(css):
                try:
                    shown = self.text(element) if text is not None else ""
                except RuntimeError as e:
                    # The page re-rendered the element between the find and the read (the live
                    # feed refreshes lists): look again.
                    if "stale element" in str(e):
                        continue
                    raise
                if text is None or text.lower() in shown.lower():
                    return element
            time.sleep(0.1)
        self.screenshot(os.environ.get("RWFS_UI_FAILURE_SHOT", "/tmp/rwfs-ui-failure.png"))
        raise SystemExit(f"timed out waiting for {what} ({css})")

    def text(self, element):
        return self.s("GET", f"/element/{element}/text")

    def click(self, element):
        self.s("POST", f"/element/{element}/click", {})

    def screenshot(self, path):
        png = base64.b64decode(self.s("GET", "/screenshot"))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "wb") as f:
            f.write(png)

    def open(self, url):
        """Open the page at `url` and wait until its live feed is connected."""
        self.s("POST", "/url", {"url": url})
        self.wait_for("#status", "the live feed", text="live")

    def quit(self):
        try:
            self.s("DELETE", "")
        finally:
            self.proc.terminate()
            self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


def main():
    url, shot = sys.argv[1], sys.argv[2]
    d = Driver()
    try:
        d.open(url)
        d.wait_for("#timeline tr.group", "the agent's rows", text="agent")
        rows = d.find_all("#timeline tr.row")
        if len(rows) < 18:
            raise SystemExit(f"expected the scripted session's 18 rows, saw {len(rows)}")
        # One header per session with its count, then one per program within it.
        d.wait_for("#timeline tr.group", "the agent's session header", text="agent · 6 rows")
        d.wait_for("#timeline tr.group", "the setup session header", text="setup · 12 rows")
        groups = d.find_all("#timeline tr.group")
        if len(groups) != 2:
            raise SystemExit(f"expected one header per session (2), saw {len(groups)}")
        d.wait_for("#timeline tr.program", "a program header with its count", text="6 rows")
        d.screenshot(shot)
        print(f"timeline: {len(rows)} rows; screenshot {shot}")

        d.click(d.wait_for("#timeline a.path-link", "a link to src/f1.txt", text="src/f1.txt"))
        d.wait_for("#version-table tr", "the versions of src/f1.txt")
        d.click(d.wait_for("#diff-button", "the diff button"))
        diff = d.wait_for("#diff-text", "the diff")
        added = d.find_all("#diff-text .add")
        if not added or "TWO 1 (agent)" not in d.text(added[0]):
            raise SystemExit(f"unexpected diff: {d.text(diff)!r}")
        print("diff: " + " | ".join(d.text(diff).splitlines()))

        # The blame gutter: line 2 is the agent's, lines 1 and 3 the setup's; each run of
        # lines one row introduced has one gutter entry.
        d.click(d.wait_for("#blame-button", "the blame button"))
        d.wait_for("#blame-table tr.origin", "the agent's line in the blame", text="agent")
        runs = [d.text(r) for r in d.find_all("#blame-table tr.origin")]
        lines = d.find_all("#blame-table tr")
        if len(lines) != 3 or len(runs) != 3 or "setup" not in runs[0] or "TWO 1 (agent)" not in runs[1] \
                or "setup" not in runs[2]:
            raise SystemExit(f"unexpected blame: {runs!r}")
        print("blame: " + " | ".join(runs))

        d.click(d.wait_for(".session[data-session=agent] a", "the agent's session"))
        d.wait_for("#filter", "the timeline filtered to the agent", text="session agent")
        d.click(d.wait_for("#rewind-session option[value=agent]", "the agent in the rewind list"))
        d.click(d.wait_for("#rewind-preview", "the preview button"))
        d.wait_for("#plan-table tr", "the rewind plan")
        confirm = d.wait_for("#rewind-confirm", "the confirm button", text="Rewind 6 files")
        d.click(confirm)
        done = d.wait_for("#rewind-done", "the rewind's result", text="applied 6 steps")
        print("rewind: " + d.text(done))
    finally:
        d.quit()


if __name__ == "__main__":
    main()
