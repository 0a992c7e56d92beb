#!/usr/bin/env python3
"""The history page's first view on the benchmark's workspace, for integration/bench/history.sh.

    ui_first_view.py RWFS WORKSPACE

Starts `rwfs ui` in WORKSPACE and times what the page asks for before it shows anything: the
page itself, the sessions and the first timeline page (100 rows), requested together as the
page does; then a page further back (`before`), and a file's versions. Median of 5 views, in
milliseconds, printed as rows of the benchmark's table.
"""

import concurrent.futures
import statistics
import subprocess
import sys
import time
import urllib.request


def main():
    rwfs, ws = sys.argv[1], sys.argv[2]
    proc = subprocess.Popen([rwfs, "-w", ws, "ui"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = next(w for w in proc.stdout.readline().split() if w.startswith("http://"))
        base, token = url.split("/#token=")

        def get(path):
            request = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.read()

        def first_view():
            with concurrent.futures.ThreadPoolExecutor(3) as pool:
                list(pool.map(get, ["/", "/api/sessions", "/api/rows?limit=100"]))

        def timed(f):
            runs = []
            for _ in range(5):
                start = time.perf_counter()
                f()
                runs.append((time.perf_counter() - start) * 1000)
            return statistics.median(runs)

        row = lambda name, ms, note="": print(f"{name:<34} {ms:10.0f} ms   {note}")
        row("ui first view (page+sessions+100 rows)", timed(first_view), "target ≤ 1000")
        row("ui rows page before seq 998000", timed(lambda: get("/api/rows?limit=100&before=998000")))
        row("ui versions of a file", timed(lambda: get("/api/history?path=real/d07/f00007.txt")))
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
