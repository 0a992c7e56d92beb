#!/usr/bin/env python3
"""Approve and deny from the page of `rwfs ui` in Debian's chromium (W3C WebDriver).

    approve.py URL SCREENSHOT.png

URL is what `rwfs ui` printed (with the token). The workspace (tests/approve.rs) holds two
versions parked for approval: docs/a.md ("# A" -> "# B") and docs/b.md. The script waits for
both in the page's approval list, checks docs/a.md's diff, approves it, denies docs/b.md, and
waits for the page to report each decision and to empty its list. The caller checks the files
and the journal. Uses browser.py's driver (standard library only).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import Driver  # noqa: E402


def main():
    url, shot = sys.argv[1], sys.argv[2]
    d = Driver()
    try:
        d.open(url)
        a = d.wait_for(".approval[data-path='docs/a.md']", "docs/a.md waiting for approval")
        d.wait_for(".approval[data-path='docs/b.md']", "docs/b.md waiting for approval")
        added = d.find_all(".approval[data-path='docs/a.md'] pre .add")
        if not added or "# B" not in d.text(added[0]):
            raise SystemExit(f"unexpected diff of docs/a.md: {d.text(a)!r}")
        d.screenshot(shot)
        d.click(d.wait_for(".approval[data-path='docs/a.md'] button.approve", "docs/a.md's approve button"))
        d.wait_for("#approval-result .decided", "the approval reported", text="approved: docs/a.md")
        d.click(d.wait_for(".approval[data-path='docs/b.md'] button.deny", "docs/b.md's deny button"))
        d.wait_for("#approval-result .decided", "the denial reported", text="denied: docs/b.md")
        deadline = time.time() + 20
        while d.find_all(".approval"):
            if time.time() > deadline:
                raise SystemExit("the approval list did not empty")
            time.sleep(0.1)
        print("approved docs/a.md and denied docs/b.md from the page")
    finally:
        d.quit()


if __name__ == "__main__":
    main()
