#!/usr/bin/env bash
# The external MCP clients of the integration tests (tests/mcp/clients.rs) and of the MCP
# benchmark (integration/bench/mcp.sh), at pinned versions, installed into DIR:
#
#   integration/mcp/setup.sh [DIR]     (default: ${XDG_CACHE_HOME:-~/.cache}/rwfs/mcp-clients)
#
#   DIR/client/      venv with the Python `mcp` SDK 2.3.0 (requirements-client.txt): the client
#                    every script here uses
#   DIR/reference/   venv with the reference server, `resilient-write` 0.3.0 on `mcp` 1.30.0
#                    (requirements-reference.txt; its server does not start on mcp 2.x)
#   DIR/node/        `npm ci` of package.json + package-lock.json: MCP Inspector 2.12.0
#   DIR/env.sh       the variables the tests read, to `source`:
#                    RWFS_MCP_PY, RWFS_REF_SERVER, RWFS_INSPECTOR
#
# Idempotent: a part whose pins (and interpreter) have not changed since it was installed is
# kept as it is, so a second run is offline and takes a second. Needs python3 (3.11 or later)
# with venv, node and npm; the registries only when a part is (re)installed.
#
# The reference requires Python >= 3.12 (its metadata; the code runs on 3.11, and its own test
# suite passes there): a python3.13 or python3.12 is used for it when one runs, else python3
# with --ignore-requires-python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rwfs/mcp-clients}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

for tool in python3 node npm sha256sum; do
    command -v "$tool" >/dev/null || { echo "setup.sh: $tool is needed" >&2; exit 1; }
done

# The stamp of a part: what it was installed from.
stamp_of() { # files...
    cat "$@" | sha256sum | cut -d' ' -f1
}

# A venv at $1 from requirements file $2 with interpreter $3 (extra pip flags after).
venv() {
    local at=$1 requirements=$2 python=$3
    shift 3
    local want
    want="$(stamp_of "$requirements") $("$python" -c 'import sys; print(sys.version.split()[0])') $*"
    if [ -f "$at/.rwfs-stamp" ] && [ "$(cat "$at/.rwfs-stamp")" = "$want" ]; then
        echo "setup.sh: $(basename "$at"): up to date"
        return
    fi
    echo "setup.sh: $(basename "$at"): installing $(basename "$requirements") with $("$python" --version)"
    rm -rf "$at"
    "$python" -m venv "$at"
    "$at/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --only-binary :all: \
        "$@" -r "$requirements"
    echo "$want" >"$at/.rwfs-stamp"
}

# An interpreter that meets the reference's Requires-Python, if one runs here.
ref_python() {
    local candidates=(python3.13 python3.12)
    if command -v pyenv >/dev/null; then
        local root
        root=$(pyenv root)
        for v in "$root"/versions/3.1[2-9]*; do
            [ -x "$v/bin/python3" ] && candidates+=("$v/bin/python3")
        done
    fi
    for python in "${candidates[@]}"; do
        if "$python" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$python"
            return
        fi
    done
}

venv "$dir/client" "$here/requirements-client.txt" python3

python=$(ref_python)
if [ -n "$python" ]; then
    venv "$dir/reference" "$here/requirements-reference.txt" "$python"
else
    venv "$dir/reference" "$here/requirements-reference.txt" python3 --ignore-requires-python
fi

node_stamp="$(stamp_of "$here/package.json" "$here/package-lock.json") $(node --version)"
if [ -f "$dir/node/.rwfs-stamp" ] && [ "$(cat "$dir/node/.rwfs-stamp")" = "$node_stamp" ] \
    && [ -x "$dir/node/node_modules/.bin/mcp-inspector" ]; then
    echo "setup.sh: node: up to date"
else
    echo "setup.sh: node: npm ci (MCP Inspector) with node $(node --version)"
    rm -rf "$dir/node"
    mkdir -p "$dir/node"
    cp "$here/package.json" "$here/package-lock.json" "$dir/node/"
    # The Inspector asks for node >= 22.19 but its CLI works on 20 (npm only warns); its
    # postinstall only matters in a source checkout.
    (cd "$dir/node" && npm ci --quiet --no-audit --no-fund --ignore-scripts --loglevel=error)
    echo "$node_stamp" >"$dir/node/.rwfs-stamp"
fi

for need in "$dir/client/bin/python" "$dir/reference/bin/resilient-write" "$dir/node/node_modules/.bin/mcp-inspector"; do
    [ -x "$need" ] || { echo "setup.sh: $need is missing after the install" >&2; exit 1; }
done

cat >"$dir/env.sh" <<EOF
export RWFS_MCP_PY='$dir/client/bin/python'
export RWFS_REF_SERVER='$dir/reference/bin/resilient-write'
export RWFS_INSPECTOR='$dir/node/node_modules/.bin/mcp-inspector'
EOF
echo "setup.sh: ready; source $dir/env.sh"
