#!/usr/bin/env bash
# Unpacks Debian's nginx binary into .build/nginx (no install, no service, no
# root-owned files) so the end-to-end test can run deploy/nginx.conf in front
# of Sluice. A no-op when it is already there. Needs apt's package lists.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.build/nginx
if [ -x "$dest/usr/sbin/nginx" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download nginx >/dev/null 2>&1)
mkdir -p "$dest"
dpkg -x "$tmp"/nginx_*.deb "$dest"
"$dest/usr/sbin/nginx" -v
