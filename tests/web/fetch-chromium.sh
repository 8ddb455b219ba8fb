#!/usr/bin/env bash
# Unpacks Debian's chromium, and each shared library it needs that this
# machine lacks, into .build/chromium (no install, no root-owned files, no
# service), for the browser test (tests/web). Prints the path of a wrapper
# that runs it with those libraries. A no-op when it is already there.
# Needs apt's package lists; apt-get download fetches as any user.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=$PWD/.build/chromium
wrapper=$dest/chromium
if [ -x "$wrapper" ] && "$wrapper" --version >/dev/null 2>&1; then
  echo "$wrapper"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Walk the Depends graph from chromium: follow the first alternative of each
# dependency, but only into libraries (lib*) and chromium's own packages;
# desktop pieces (xdg-utils, portals, fonts beyond the system's) are not
# needed to render headless. Packages this machine has are skipped.
declare -A seen=()
queue=(chromium chromium-common)
want=()
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}
  queue=("${queue[@]:1}")
  [ -n "${seen[$p]:-}" ] && continue
  seen[$p]=1
  installed "$p" && continue
  want+=("$p")
  while read -r dep; do
    case $dep in lib*|chromium*) queue+=("$dep") ;; esac
  done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances "$p" 2>/dev/null |
    awk '/^  Depends: [^<]/ {print $2}')
done
(cd "$tmp" && apt-get download "${want[@]}" >/dev/null 2>&1) || {
  echo "fetch-chromium: apt-get download ${want[*]} failed" >&2
  exit 1
}
rm -rf "$dest"
mkdir -p "$dest/root"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$dest/root"; done
libs=$dest/root/usr/lib/x86_64-linux-gnu
cat > "$wrapper" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$libs:$libs/pulseaudio\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dest/root/usr/lib/chromium/chromium" "\$@"
WRAP
chmod +x "$wrapper"
missing=$(LD_LIBRARY_PATH="$libs:$libs/pulseaudio" ldd "$dest/root/usr/lib/chromium/chromium" | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
  echo "fetch-chromium: still missing: $missing" >&2
  exit 1
fi
"$wrapper" --version >&2
echo "$wrapper"
