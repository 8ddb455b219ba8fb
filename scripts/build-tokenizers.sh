#!/usr/bin/env bash
# Builds libtokenizers.a (the Rust half of github.com/daulet/tokenizers) from the Go module's
# own source, so the static library always matches the Go bindings that call it: the library
# exports tokenizers_version_<tag> and the Go side refuses to link against any other version.
#
# Output: .build/lib/libtokenizers.a, linked with CGO_LDFLAGS=-L$PWD/.build/lib (the module's
# own #cgo directive already adds -ltokenizers -ldl -lm -lstdc++).
# A no-op when the archive exists and .build/lib/tokenizers.stamp names the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."

module=github.com/daulet/tokenizers
version=v1.22.1 # keep equal to go.mod; v1.23+ fetch tiktoken-rs from git, which is unreachable here
lib=.build/lib/libtokenizers.a
stamp=.build/lib/tokenizers.stamp

if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$module@$version" ]; then
  exit 0
fi

dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -f "$dir/Cargo.toml" ]; then
  echo "build-tokenizers: cannot find the source of $module@$version (go mod download gave '$dir')" >&2
  exit 1
fi

# The module cache is read-only and cargo writes target/ next to Cargo.toml: build in a copy.
src=.build/tokenizers-src
rm -rf "$src"
mkdir -p "$src" .build/lib
cp -R "$dir"/. "$src"/
chmod -R u+w "$src"

# target/ lives outside the copy so a rebuild (new pin, deleted archive) reuses compiled crates.
target=$PWD/.build/tokenizers-target
echo "build-tokenizers: cargo build --release ($module@$version)" >&2
(cd "$src" && CARGO_TARGET_DIR="$target" cargo build --release --locked --lib)

cp "$target/release/libtokenizers.a" "$lib.tmp"
mv "$lib.tmp" "$lib"
echo "$module@$version" >"$stamp"
echo "build-tokenizers: wrote $lib" >&2
