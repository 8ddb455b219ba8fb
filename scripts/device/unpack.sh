#!/usr/bin/env bash
# Unpacks what build.sh carries compressed (xz, or gzip where the build
# machine had no xz) from SRC into DEST, making the test binaries and the CLI
# executable. Python's lzma stands in for an xz the device image may lack
# (the H200 image has Python for PyTorch).
#
#   scripts/device/unpack.sh SRC DEST      first.sh and run.sh call it
set -euo pipefail
src=$1 dest=$2
mkdir -p "$dest"
for f in "$src"/*.gz "$src"/*.xz; do
	[ -f "$f" ] || continue
	n=$(basename "${f%.*}")
	case $f in
	*.gz) gzip -dc "$f" >"$dest/$n" ;;
	*.xz) xz -dc "$f" 2>/dev/null >"$dest/$n" ||
		"${PYTHON:-python3}" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$f" >"$dest/$n" ;;
	esac
	case $n in *.test | sluice*) chmod +x "$dest/$n" ;; esac
done
