#!/usr/bin/env python3
"""The floor under batch-mode creates: what the batch contract itself costs on the backing
filesystem, with no FUSE and no gate, beside the work a plain passthrough does there.

    python3 integration/bench/floor.py DIR [FILES] [WINDOW]

In a fresh subdirectory of DIR (put it on the filesystem the mount benchmark uses), FILES files
(default 5000) of 4 KiB are made two ways, alternating, three rounds:

  plain     create + write + close: a plain passthrough's backing work per file
  contract  what batch durability does per file on the backing filesystem: the draft made in
            drafts/ (O_EXCL), its recovery note (user.rwfs.target) set, 4 KiB written, a row of
            the journal's size appended; then per window of WINDOW files (default 350, about
            the mount benchmark's 100 ms window) one sync, and for each file the note removed
            and the draft renamed into place

It prints microseconds per file. Add the difference to the reference passthrough's time per
file through FUSE (integration/bench/mount.sh --peer) for the floor of rwfs's batch creates:
what no cut of rwfs's own work can go below without changing the contract. A WINDOW larger
than FILES leaves the syncs out.
"""
import os
import shutil
import sys
import time

base = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
window = int(sys.argv[3]) if len(sys.argv) > 3 else 350
data = os.urandom(4096)
# A row as long as the mount's (chain, mac and sha256 are 64 hex digits each).
row = (b'{"bytes":4096,"caller":"rwfs-mount","chain":"' + b"0" * 64 + b'","mac":"' + b"0" * 64
       + b'","op":"create","path":"d/f","sha256":"' + b"0" * 64 + b'","ts":"2026-01-01T00:00:00.000Z"}\n')


def plain(d):
    os.makedirs(d + "/d")
    t = time.perf_counter()
    for i in range(n):
        fd = os.open(f"{d}/d/f{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.close(fd)
    return time.perf_counter() - t


def contract(d):
    os.makedirs(d + "/d")
    os.makedirs(d + "/drafts")
    journal = os.open(d + "/journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    t = time.perf_counter()
    staged = []

    def install():
        for fd, name, k in staged:
            os.removexattr(fd, "user.rwfs.target")
            os.rename(name, f"{d}/d/f{k}")
            os.close(fd)
        staged.clear()

    for i in range(n):
        name = f"{d}/drafts/.rwfs.{i:016x}.tmp"
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.setxattr(fd, "user.rwfs.target", f"d/f{i}".encode())
        os.write(fd, data)
        os.write(journal, row)
        staged.append((fd, name, i))
        if len(staged) == window:
            os.sync()
            install()
    install()
    os.close(journal)
    return time.perf_counter() - t


for r in range(3):
    for way in (plain, contract):
        d = f"{base}/floor-{os.getpid()}-{way.__name__}-{r}"
        os.sync()
        took = way(d)
        print(f"{way.__name__:8s} round {r}: {took * 1e6 / n:7.1f} us per file", flush=True)
        shutil.rmtree(d, ignore_errors=True)
