#!/usr/bin/env bash
# Builds (once) llm-d's endpoint picker (EPP) from the pinned source snapshot
# of github.com/llm-d/llm-d-router and prints the binary's path. The Go proxy
# does not serve github.com/llm-d/*, so the source comes from a snapshot
# pinned by commit (../shared/peers/, see its README); its go.mod is used as
# is and its one llm-d dependency, llm-d-kv-cache v0.9.0, comes from the
# proxy by exact version. ~5 minutes cold on two cores; the binary is kept
# under .build/llmd/ and rebuilt only when missing or the snapshot changes.
#
#   scripts/llmd/build-router.sh [SNAPSHOT.tar.gz]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
snap=${1:-${LLMD_ROUTER_SNAPSHOT:-$root/../shared/peers/llm-d-router-ebab687.tar.gz}}
out=$root/.build/llmd
bin=$out/epp
stamp=$out/epp.snapshot
[ -f "$snap" ] || { echo "build-router: no snapshot at $snap (see ../shared/peers/README.md)" >&2; exit 2; }
want=$(sha256sum "$snap" | cut -d' ' -f1)
if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$out"
rm -rf "$out/llm-d-router" "$bin"
tar -xzf "$snap" -C "$out"
[ -d "$out/llm-d-router/cmd/epp" ] || { echo "build-router: $snap holds no llm-d-router/cmd/epp" >&2; exit 2; }
echo "build-router: building llm-d's EPP from $(basename "$snap") (one time, ~5 min)" >&2
(cd "$out/llm-d-router" && GOFLAGS=-mod=mod nice go build -o "$bin.tmp" ./cmd/epp) >&2
mv "$bin.tmp" "$bin"
echo "$want" >"$stamp"
echo "$bin"
