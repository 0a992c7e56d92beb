#!/usr/bin/env bash
# The real agent harnesses of the agent tests (tests/agents.rs) and of the agent benchmark
# (integration/bench/agents.sh), at pinned versions, installed into DIR:
#
#   integration/agents/setup.sh [DIR]    (default: ${XDG_CACHE_HOME:-~/.cache}/rwfs/agents)
#
#   DIR/node/     `npm ci` of package.json + package-lock.json: Claude Code 2.1.332
#                 (@anthropic-ai/claude-code, a native binary in a platform package) and Codex
#                 CLI 0.171.0 (@openai/codex, a Rust binary in a platform package)
#   DIR/aider/    venv with aider-chat 0.86.2 (requirements-aider.txt)
#   DIR/env.sh    the variables the tests read, to `source`:
#                 RWFS_CLAUDE, RWFS_CODEX, RWFS_AIDER
#
# Idempotent: a part whose pins (and interpreter) have not changed since it was installed is
# kept as it is, so a second run is offline and takes a second. Needs python3 with venv, node
# and npm; the registries only when a part is (re)installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rwfs/agents}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

for tool in python3 node npm sha256sum; do
    command -v "$tool" >/dev/null || { echo "setup.sh: $tool is needed" >&2; exit 1; }
done

stamp_of() { # files...
    cat "$@" | sha256sum | cut -d' ' -f1
}

node_stamp="$(stamp_of "$here/package.json" "$here/package-lock.json") $(node --version)"
if [ -f "$dir/node/.rwfs-stamp" ] && [ "$(cat "$dir/node/.rwfs-stamp")" = "$node_stamp" ] \
    && [ -x "$dir/node/node_modules/.bin/claude" ] && [ -x "$dir/node/node_modules/.bin/codex" ]; then
    echo "setup.sh: node: up to date"
else
    echo "setup.sh: node: npm ci (Claude Code, Codex CLI) with node $(node --version)"
    rm -rf "$dir/node"
    mkdir -p "$dir/node"
    cp "$here/package.json" "$here/package-lock.json" "$dir/node/"
    # Both ask for a newer node than Debian's; their binaries are native and run (npm warns).
    (cd "$dir/node" && npm ci --quiet --no-audit --no-fund --loglevel=error)
    echo "$node_stamp" >"$dir/node/.rwfs-stamp"
fi

aider_stamp="$(stamp_of "$here/requirements-aider.txt") $(python3 -c 'import sys; print(sys.version.split()[0])')"
if [ -f "$dir/aider/.rwfs-stamp" ] && [ "$(cat "$dir/aider/.rwfs-stamp")" = "$aider_stamp" ]; then
    echo "setup.sh: aider: up to date"
else
    echo "setup.sh: aider: installing $(cat "$here/requirements-aider.txt") with $(python3 --version)"
    rm -rf "$dir/aider"
    python3 -m venv "$dir/aider"
    "$dir/aider/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        -r "$here/requirements-aider.txt"
    echo "$aider_stamp" >"$dir/aider/.rwfs-stamp"
fi

for need in "$dir/node/node_modules/.bin/claude" "$dir/node/node_modules/.bin/codex" "$dir/aider/bin/aider"; do
    [ -x "$need" ] || { echo "setup.sh: $need is missing after the install" >&2; exit 1; }
done

cat >"$dir/env.sh" <<ENV
export RWFS_CLAUDE='$dir/node/node_modules/.bin/claude'
export RWFS_CODEX='$dir/node/node_modules/.bin/codex'
export RWFS_AIDER='$dir/aider/bin/aider'
ENV
echo "setup.sh: ready; source $dir/env.sh"
