#!/usr/bin/env python3
"""The agent session benchmark's driver (see integration/bench/agents.sh).

The real Claude Code runs one scripted 30-call session (12 Write, 8 Edit, 5 Read, 2 Grep,
3 Bash git) against integration/agents/model.py, in a fresh copy of a small committed git
repository, on a plain directory and on an rwfs mount over it (`rwfs mount --daemon` over
itself, as `rwfs run` does, in close and in batch durability; and in close durability with
Claude Code running `rwfs hook` after its tools, as `rwfs hooks --for claude` sets it up).
Rounds alternate the order of the modes. The session's wall time is the harness process's,
from start to exit (mounting and unmounting are reported apart).

The per-Write cost is measured apart, with the exact syscalls of Claude Code's Write tool
(open a temporary name O_CREAT|O_EXCL, write, fsync, close, rename over the file) and of its
Edit tool (read the file, then the same), 300 of each per mode, in the same directories.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "agents", "model.py")
MODES = ["plain", "close", "batch", "close+hook"]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def template(base):
    """A committed repository of 20 small Python files."""
    path = os.path.join(base, "template")
    os.makedirs(os.path.join(path, "src"))
    for i in range(20):
        with open(os.path.join(path, "src", f"mod_{i:02}.py"), "w") as f:
            f.write(f'"""Module {i}."""\n\n\ndef f{i}(x):\n    return x + {i}\n' + "# filler line\n" * 40)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run(["git", "init", "-q", path], check=True)
    subprocess.run(git + ["-C", path, "add", "-A"], check=True)
    subprocess.run(git + ["-C", path, "commit", "-qm", "start"], check=True)
    return path


def scenario(ws):
    """30 calls, one per turn: the session an agent makes on a small change."""
    src = lambda i: os.path.join(ws, "src", f"mod_{i:02}.py")
    turns = []
    for i in range(12):
        if i < 5:
            turns.append({"calls": [{"tool": "Read", "input": {"file_path": src(i)}}]})
        if i < 8:
            turns.append({"calls": [{"tool": "Edit", "input": {"file_path": src(i),
                                                               "old_string": f"return x + {i}\n",
                                                               "new_string": f"return x + {i} * 2\n"}}]})
        turns.append({"calls": [{"tool": "Write", "input": {"file_path": os.path.join(ws, "src", f"new_{i:02}.py"),
                                                            "content": f"def g{i}(y):\n    return y - {i}\n" * 20}}]})
        if i in (5, 10):
            turns.append({"calls": [{"tool": "Grep", "input": {"pattern": "return", "path": os.path.join(ws, "src")}}]})
    for command in ["git status --short", "git diff --stat", "git add -A && git -c user.name=a -c user.email=a@b commit -qm change"]:
        turns.append({"calls": [{"tool": "Bash", "input": {"command": command, "description": "git"}}]})
    assert len(turns) == 30, len(turns)
    turns.append({"text": "done"})
    return turns


def start_model(turns, workdir):
    scen = os.path.join(workdir, "scenario.json")
    with open(scen, "w") as f:
        json.dump({"turns": turns}, f)
    proc = subprocess.Popen([sys.executable, MODEL, scen, os.path.join(workdir, "record.jsonl")],
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split()[1])
    return proc, port


def session(args, base, mode, round_no):
    work = os.path.join(base, f"{mode.replace('+', '-')}-{round_no}")
    os.makedirs(work)
    ws = os.path.join(work, "ws")
    shutil.copytree(os.path.join(base, "template"), ws, symlinks=True)
    home = os.path.join(work, "home")
    os.makedirs(home)
    settings = os.path.join(work, "settings.json")
    with open(settings, "w") as f:
        if mode == "close+hook":
            f.write(subprocess.run([args.rwfs, "hooks", "--for", "claude"], check=True, capture_output=True,
                                   text=True).stdout)
        else:
            f.write("{}")
    model, port = start_model(scenario(ws), work)
    mount_s = 0.0
    try:
        if mode != "plain":
            t = time.monotonic()
            durability = mode.split("+")[0]
            subprocess.run([args.rwfs, "mount", "--daemon", "--durability", durability, "--stderr-notice", "on", ws],
                           check=True, capture_output=True)
            mount_s = time.monotonic() - t
        env = dict(os.environ, HOME=home, IS_SANDBOX="1", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
                   ANTHROPIC_API_KEY="sk-bench", DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                   DISABLE_ERROR_REPORTING="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        t = time.monotonic()
        out = subprocess.run(["timeout", "300", args.claude, "-p", "Make the change.", "--dangerously-skip-permissions",
                              "--output-format", "json", "--settings", settings],
                             cwd=ws, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t
        if out.returncode != 0:
            raise SystemExit(f"claude failed in {mode}: {out.stdout[-2000:]}{out.stderr[-2000:]}")
        with open(os.path.join(work, "record.jsonl")) as f:
            arrivals = [r["at"] for r in map(json.loads, f) if r["agent"]]
        calls = len(arrivals) - 1
        if calls != 30:
            raise SystemExit(f"{mode}: the session made {calls} calls, not 30")
        with open(os.path.join(ws, "src", "mod_07.py")) as f:
            if "return x + 7 * 2" not in f.read():
                raise SystemExit(f"{mode}: an edit did not land")
    finally:
        if mode != "plain":
            t = time.monotonic()
            subprocess.run([args.rwfs, "unmount", ws], capture_output=True)
            mount_s += time.monotonic() - t
        model.kill()
        model.wait()
    # Each call's turnaround in the harness: from the request that asked for it to the request
    # that reports it (the endpoint answers at once): the tool's cost as the agent pays it.
    tools = [t["calls"][0]["tool"] for t in scenario(ws) if "calls" in t]
    turnaround = {}
    for k, tool in enumerate(tools):
        turnaround.setdefault(tool, []).append((arrivals[k + 1] - arrivals[k]) * 1000)
    return wall, mount_s, turnaround


def write_costs(args, base, mode, n=300):
    """Median ms of Claude Code's Write and Edit syscalls on `mode`'s directory."""
    work = os.path.join(base, f"ops-{mode}")
    os.makedirs(work)
    ws = os.path.join(work, "ws")
    shutil.copytree(os.path.join(base, "template"), ws, symlinks=True)
    if mode != "plain":
        subprocess.run([args.rwfs, "mount", "--daemon", "--durability", mode, ws], check=True, capture_output=True)
    try:
        content = ("def g(y):\n    return y\n" * 60).encode()
        writes, edits = [], []
        for i in range(n):
            target = os.path.join(ws, "src", f"mod_{i % 20:02}.py")
            t = time.perf_counter()
            if i % 2:
                with open(target, "rb") as f:
                    old = f.read()
                data = old.replace(b"# filler line\n", b"# filled line\n", 1) + b"# edit\n"
            else:
                data = content + str(i).encode()
            temp = f"{target}.tmp.{os.getpid()}.{i:012x}"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            os.rename(temp, target)
            (edits if i % 2 else writes).append((time.perf_counter() - t) * 1000)
        return statistics.median(writes), statistics.median(edits)
    finally:
        if mode != "plain":
            subprocess.run([args.rwfs, "unmount", ws], capture_output=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rwfs", required=True)
    parser.add_argument("--claude", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    base = os.path.join(args.dir, f"rwfs-bench-agents-{os.getpid()}")
    os.makedirs(base)
    try:
        template(base)
        walls = {m: [] for m in MODES}
        mounts = {m: [] for m in MODES}
        calls = {m: {} for m in MODES}
        for r in range(args.rounds):
            order = MODES if r % 2 == 0 else list(reversed(MODES))
            for mode in order:
                wall, mount_s, turnaround = session(args, base, mode, r)
                for tool, times in turnaround.items():
                    calls[mode].setdefault(tool, []).extend(times)
                walls[mode].append(wall)
                mounts[mode].append(mount_s)
                log(f"round {r + 1}: {mode:<11} {wall:6.2f} s (mount + unmount {mount_s:.2f} s)")
        ops = {}
        for mode in ["plain", "close", "batch"]:
            ops[mode] = write_costs(args, base, mode)
            log(f"write/edit syscalls on {mode}: {ops[mode][0]:.2f} / {ops[mode][1]:.2f} ms")
        med = {m: statistics.median(walls[m]) for m in MODES}
        print(f"agent session: Claude Code, 30 scripted calls, median of {args.rounds} rounds (modes alternated)")
        print(f"{'':36}" + "".join(f"{m:>12}" for m in MODES))
        print(f"{'session wall time (s)':36}" + "".join(f"{med[m]:12.2f}" for m in MODES))
        print(f"{'ratio to plain':36}" + "".join(f"{med[m] / med['plain']:12.2f}" for m in MODES))
        print(f"{'mount + unmount (s, not in the above)':36}" + "".join(f"{statistics.median(mounts[m]):12.2f}" for m in MODES))
        print()
        print(f"{'one call in the harness (ms, median)':36}" + "".join(f"{m:>12}" for m in MODES))
        for tool in ["Write", "Edit", "Read", "Grep", "Bash"]:
            per = {m: statistics.median(calls[m][tool]) for m in MODES}
            print(f"{tool:36}" + "".join(f"{per[m]:12.1f}" for m in MODES))
            print(f"{'  ratio to plain':36}" + "".join(f"{per[m] / per['plain']:12.2f}" for m in MODES))
        print()
        print(f"{'Claude Code Write/Edit syscalls (ms)':36}" + "".join(f"{m:>12}" for m in ["plain", "close", "batch"]))
        for i, name in enumerate(["Write (tmp, write, fsync, rename)", "Edit (read, then the same)"]):
            print(f"{name:36}" + "".join(f"{ops[m][i]:12.2f}" for m in ["plain", "close", "batch"]))
            print(f"{'  ratio to plain':36}" + "".join(f"{ops[m][i] / ops['plain'][i]:12.2f}" for m in ["plain", "close", "batch"]))
        print()
        print("targets: close session <= 1.10 x plain; a Write/Edit <= 1.5 x plain")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


main()
