"""The MCP benchmark's driver (run by integration/bench/mcp.sh, which installs the pinned clients
and builds rwfs --release): one Python `mcp` client, the same calls, against rwfs and the
reference server side by side in one run.

  write    `rw_safe_write` (`rw.safe_write` on the reference) of 4 KiB to a new file, N calls
           (default 1,000) after a warm-up of 20: p50, p99, mean latency and calls/s; the
           servers alternate by round, each round in a fresh workspace; rwfs is measured under
           the legacy handshake (as the reference) and under the modern one its client picks
  search   `rr_search_then_page` over a 100 MB log for a string on its last line (a full scan):
           MB/s, the median of 5 calls (rwfs only: the reference's resilient-read is not
           installed)

The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import anyio

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mcp"))
from rwmcp import Failed, _failed_in, connect, reference_server, rwfs_server  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly box jugs of liquor".split()


def payload(i: int, size: int = 4096) -> str:
    """4 KiB of prose, different for every call (no secrets, nothing to deduplicate)."""
    words, out, n = [], 0, i
    while out < size:
        w = WORDS[n % len(WORDS)]
        n = n * 1103515245 + 12345 & 0x7FFFFFFF
        words.append(w)
        out += len(w) + 1
    text = f"call {i}\n" + " ".join(words)
    return (text[: size - 1] + "\n")[:size]


def progress(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], p: float) -> float:
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


async def write_round(params, dotted: bool, mode: str, calls: int, warmup: int) -> tuple[list[float], list[float]]:
    """Latencies (seconds) of `calls` safe_writes after `warmup` unmeasured ones, and of as many
    risk_score calls on two bytes (the round trip without a write: client, transport, server)."""
    latencies, floor = [], []
    async with connect(params, name="bench", dotted=dotted, mode=mode) as s:
        score = s.wire("rw_risk_score")
        for i in range(warmup + calls):
            started = time.perf_counter()
            result = await s.client.call_tool(score, {"content": "ok"})
            elapsed = time.perf_counter() - started
            if result.is_error:
                raise Failed(f"{score} failed: {result.content[0].text[:500]}")
            if i >= warmup:
                floor.append(elapsed)
        tool = s.wire("rw_safe_write")
        for i in range(warmup + calls):
            args = {"path": f"bench/w{i // 100:03}/f{i:05}.txt", "content": payload(i)}
            started = time.perf_counter()
            result = await s.client.call_tool(tool, args)
            elapsed = time.perf_counter() - started
            text = result.content[0].text if result.content else ""
            if result.is_error or '"ok":true' not in text.replace(" ", ""):
                raise Failed(f"{tool} call {i} failed: {text[:500]}")
            if i >= warmup:
                latencies.append(elapsed)
    return latencies, floor


async def bench_write(args, root: str) -> list[dict]:
    servers = [
        ("rwfs (legacy handshake)", lambda ws: rwfs_server(args.rwfs, ws), False, "legacy"),
        ("reference 0.3.0", lambda ws: reference_server(args.reference, ws), True, "legacy"),
        ("rwfs (modern, 2026-07-28)", lambda ws: rwfs_server(args.rwfs, ws), False, "auto"),
    ]
    results = {name: [] for name, *_ in servers}
    floors = {name: [] for name, *_ in servers}
    per_round = max(1, args.calls // args.rounds)
    for r in range(args.rounds):
        order = servers if r % 2 == 0 else list(reversed(servers))
        for name, make, dotted, mode in order:
            ws = tempfile.mkdtemp(prefix="ws-", dir=root)
            started = time.perf_counter()
            latencies, floor = await write_round(make(ws), dotted, mode, per_round, args.warmup)
            results[name] += latencies
            floors[name] += floor
            progress(f"write round {r + 1}/{args.rounds} {name}: {len(latencies)} calls, "
                     f"p50 {statistics.median(latencies) * 1e3:.2f} ms ({time.perf_counter() - started:.1f} s)")
            shutil.rmtree(ws, ignore_errors=True)
    rows = []
    for name, *_ in servers:
        lat = sorted(results[name])
        rows.append({
            "server": name,
            "calls": len(lat),
            "p50_ms": percentile(lat, 50) * 1e3,
            "p99_ms": percentile(lat, 99) * 1e3,
            "mean_ms": statistics.fmean(lat) * 1e3,
            "calls_s": len(lat) / sum(lat),
            "floor_p50_ms": statistics.median(floors[name]) * 1e3,
        })
    return rows


def make_log(path: str, mb: int) -> tuple[int, str]:
    """A log of `mb` MB whose last line alone holds the needle; its size and the needle."""
    needle = "NEEDLE-7f3a"
    line_no, written = 0, 0
    target = mb * 1_000_000
    with open(path, "w") as f:
        block = []
        while written < target - 200:
            line_no += 1
            line = (f"2026-11-21T10:{line_no // 60 % 60:02}:{line_no % 60:02}Z INFO worker-{line_no % 16:02} "
                    f"request {line_no:08} served in {line_no * 7 % 900:3} ms from cache shard {line_no % 64:02}\n")
            block.append(line)
            written += len(line)
            if len(block) == 10_000:
                f.write("".join(block))
                block = []
        block.append(f"2026-11-21T23:59:59Z ERROR the one line with {needle} in it\n")
        f.write("".join(block))
    return os.path.getsize(path), needle


async def bench_search(args, root: str) -> dict:
    ws = tempfile.mkdtemp(prefix="ws-", dir=root)
    os.makedirs(os.path.join(ws, "logs"))
    size, needle = make_log(os.path.join(ws, "logs", "big.log"), args.search_mb)
    progress(f"search: a {size / 1e6:.0f} MB log")
    times = []
    async with connect(rwfs_server(args.rwfs, ws), name="bench") as s:
        for i in range(args.search_rounds + 1):
            started = time.perf_counter()
            page = await s.ok("rr_search_then_page", {"path": "logs/big.log", "query": needle, "max_matches": 1})
            elapsed = time.perf_counter() - started
            if page["matches_returned"] != 1 or page["has_more"]:
                raise Failed(f"search found {page['matches_returned']} matches (expected 1, the last line)")
            if i > 0:  # the first one also reads the file into the page cache
                times.append(elapsed)
            progress(f"search {i}: {elapsed * 1e3:.0f} ms")
    shutil.rmtree(ws, ignore_errors=True)
    median = statistics.median(times)
    return {"bytes": size, "median_s": median, "mb_s": size / 1e6 / median}


async def run(args) -> None:
    root = tempfile.mkdtemp(prefix="rwfs-bench-mcp-", dir=args.dir)
    try:
        out = []
        if "write" in args.only:
            rows = await bench_write(args, root)
            ref = next(r for r in rows if r["server"].startswith("reference"))
            out.append(f"rw_safe_write, 4 KiB to a new file, {rows[0]['calls']} calls per server over stdio "
                       f"(Python mcp 2.3.0 client; {args.rounds} alternating rounds)")
            out.append(f"{'server':<28} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'calls/s':>9} {'p50 vs ref':>11}"
                       f" {'no-write p50':>13}")
            for r in rows:
                ratio = r["p50_ms"] / ref["p50_ms"]
                out.append(f"{r['server']:<28} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['mean_ms']:>8.2f} "
                           f"{r['calls_s']:>9.0f} {ratio:>10.2f}x {r['floor_p50_ms']:>10.2f} ms")
            out.append("(no-write p50: rw_risk_score of 2 bytes, the round trip through client, stdio and server; "
                       "calls/s: one client, calls in sequence)")
            legacy = rows[0]
            met = legacy["p50_ms"] <= ref["p50_ms"] / 5
            out.append(f"target rwfs p50 <= 1/5 of the reference's ({ref['p50_ms'] / 5:.2f} ms): "
                       f"{'met' if met else 'MISSED'} ({ref['p50_ms'] / legacy['p50_ms']:.1f}x faster)")
        if "search" in args.only:
            s = await bench_search(args, root)
            out.append("")
            out.append(f"rr_search_then_page, full scan of a {s['bytes'] / 1e6:.0f} MB log (rwfs; median of "
                       f"{args.search_rounds}): {s['median_s'] * 1e3:.0f} ms, {s['mb_s']:.0f} MB/s")
        print("\n".join(out), flush=True)
    finally:
        if args.keep:
            progress(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rwfs", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--dir", default=None, help="benchmark in a fresh subdirectory of DIR")
    p.add_argument("--calls", type=int, default=1000, help="measured safe_write calls per server")
    p.add_argument("--rounds", type=int, default=2, help="rounds the calls are split into")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--search-mb", type=int, default=100)
    p.add_argument("--search-rounds", type=int, default=5)
    p.add_argument("--only", default="write,search", type=lambda v: set(v.split(",")))
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    try:
        anyio.run(run, args)
    except BaseException as error:  # noqa: BLE001 - anyio wraps a failure in groups
        failed = _failed_in(error)
        if failed is None:
            raise
        print(f"mcp bench: {failed}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
