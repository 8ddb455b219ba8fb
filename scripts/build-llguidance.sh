#!/usr/bin/env bash
# Builds libllguidance.a (guidance-ai's structured-output engine, the Rust crate llguidance) from
# the crate registry's source at the pinned version, with the Cargo.lock the crate ships, so the
# archive and the C header package constrain compiles against always come from the same release.
#
# Output: .build/lib/libllguidance.a and .build/include/llguidance.h. The archive sits beside
# libtokenizers.a so the CGO_LDFLAGS=-L.build/lib the Makefile already passes covers both.
# A no-op when the archive exists and .build/lib/llguidance.stamp names the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."

crate=llguidance
version=1.9.1 # keep equal to constrain/version.go (llguidanceVersion)
lib=.build/lib/libllguidance.a
header=.build/include/llguidance.h
stamp=.build/lib/llguidance.stamp

if [ -f "$lib" ] && [ -f "$header" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$crate@$version" ]; then
  exit 0
fi

# cargo fetches crates for a manifest, not by name: a one-line manifest that depends on the exact
# version brings its source (and the source of everything it needs) into cargo's registry cache.
fetch=.build/llguidance-fetch
mkdir -p "$fetch" .build/lib .build/include
cat >"$fetch/Cargo.toml" <<TOML
[package]
name = "sluice-llguidance-fetch"
version = "0.0.0"
edition = "2021"
[lib]
path = "lib.rs"
[dependencies]
$crate = "=$version"
TOML
: >"$fetch/lib.rs"
(cd "$fetch" && cargo fetch --quiet)

dir=$(cd "$fetch" && cargo metadata --format-version 1 --quiet |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]==sys.argv[1] and p["version"]==sys.argv[2]))' "$crate" "$version")
dir=$(dirname "$dir")
if [ ! -f "$dir/Cargo.lock" ] || [ ! -f "$dir/llguidance.h" ]; then
  echo "build-llguidance: $dir lacks Cargo.lock or llguidance.h" >&2
  exit 1
fi

# cargo's registry sources are shared and must stay pristine: build in a copy. target/ lives
# outside it so a rebuild (new pin, deleted archive) reuses compiled crates.
src=.build/llguidance-src
rm -rf "$src"
mkdir -p "$src"
cp -R "$dir"/. "$src"/
chmod -R u+w "$src"
target=$PWD/.build/llguidance-target
echo "build-llguidance: cargo build --release ($crate@$version)" >&2
start=$(date +%s)
(cd "$src" && CARGO_TARGET_DIR="$target" cargo build --release --locked --lib)
echo "build-llguidance: cargo took $(($(date +%s) - start)) s" >&2

cp "$target/release/libllguidance.a" "$lib.tmp"
mv "$lib.tmp" "$lib"
cp "$src/llguidance.h" "$header"
echo "$crate@$version" >"$stamp"
echo "build-llguidance: wrote $lib" >&2
