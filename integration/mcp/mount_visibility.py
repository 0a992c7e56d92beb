"""MCP and the mount are one engine: with `rwfs mount` serving the workspace, `rwfs mcp -w WS`
relays to the mount's daemon, and a write made through either is visible through the other at
once (no cache of the mount's hides an MCP write; MCP sees a file closed in the mount).

    python mount_visibility.py --rwfs target/debug/rwfs -w WORKSPACE --mountpoint MNT
"""

from __future__ import annotations

import os
import secrets
import string

from rwmcp import check, connect, main, parser, rwfs_server, say, sha256


def mount_read(mnt: str, rel: str) -> bytes:
    with open(os.path.join(mnt, rel), "rb") as f:
        return f.read()


def mount_write(mnt: str, rel: str, data: bytes) -> None:
    path = os.path.join(mnt, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


async def run(args) -> None:
    mnt = args.mountpoint
    async with connect(rwfs_server(args.rwfs, args.workspace), name="mount-visibility") as c:
        # MCP → mount.
        one = "written through MCP\n"
        wrote = await c.ok("rw_safe_write", {"path": "shared/from-mcp.txt", "content": one})
        check(mount_read(mnt, "shared/from-mcp.txt") == one.encode(), "the mount shows the MCP write at once")
        say(f"MCP write -> mount: visible ({wrote['journal_id']})")

        # Mount → MCP: a file closed in the mount is the version MCP compares against.
        two = b"written through the mount\n"
        mount_write(mnt, "shared/from-mount.txt", two)
        stat = await c.ok("rr_stat", {"path": "shared/from-mount.txt", "include_sha256": True})
        check(stat["sha256"] == sha256(two) and stat["size"] == len(two), "rr_stat sees the mount's write", stat)
        page = await c.ok("rr_read_bytes", {"path": "shared/from-mount.txt"})
        check(page["content"].encode() == two, "rr_read_bytes reads the mount's write", page)
        replaced = await c.ok(
            "rw_safe_replace",
            {"path": "shared/from-mount.txt", "old_string": "the mount", "new_string": "the mount, then MCP",
             "expected_prev_sha256": sha256(two)},
        )
        say("mount write -> MCP: visible (rr_stat, rr_read_bytes, and a compare-and-swap on its sha256)")

        # Back to the mount, which has the old version in its caches by now.
        three = b"written through the mount, then MCP\n"
        check(replaced["sha256"] == sha256(three), "safe_replace reports the new version", replaced)
        check(mount_read(mnt, "shared/from-mount.txt") == three, "the mount shows MCP's replace at once")
        overwrite = "overwritten through MCP\n"
        await c.ok("rw_safe_write", {"path": "shared/from-mcp.txt", "content": overwrite, "mode": "overwrite",
                                     "expected_prev_sha256": wrote["sha256"]})
        check(mount_read(mnt, "shared/from-mcp.txt") == overwrite.encode(), "the mount shows MCP's overwrite at once")
        say("MCP overwrite -> mount (cached before): the new version at once")

        # A refused MCP write leaves the mount's file as it was.
        alphabet = string.ascii_letters + string.digits
        secret_line = "aws_secret_access_key = " + "".join(secrets.choice(alphabet) for _ in range(40)) + "\n"
        env = await c.err("rw_safe_write", {"path": "shared/from-mcp.txt", "content": secret_line, "mode": "overwrite"})
        check(env["error"] == "blocked", "a credential is refused through MCP too", env)
        check(mount_read(mnt, "shared/from-mcp.txt") == overwrite.encode(), "the refused write changed nothing in the mount")
        say("refused MCP write: the mount's file unchanged")


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--mountpoint", required=True, help="where the workspace is mounted")
    main("mount_visibility", run, p)
