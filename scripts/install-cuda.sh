#!/usr/bin/env bash
# Installs the CUDA toolkit that builds Sluice's CUDA backend (nvcc for the
# PTX, cuda.h and the libcuda link stub for gorgonia.org/cu): Debian's
# nvidia-cuda-toolkit 11.8, from the non-free component the machine's own
# sources leave out (about 3 minutes). A no-op when nvcc is already there.
#
#   scripts/install-cuda.sh      (CI runs it before `make cuda`)
set -euo pipefail
if command -v nvcc >/dev/null && [ -f /usr/include/cuda.h ]; then
	exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
for helper in "$here/../../shared/scripts/apt-nonfree" /work/shared/scripts/apt-nonfree; do
	if [ -x "$helper" ]; then
		exec "$helper" nvidia-cuda-toolkit nvidia-cuda-dev
	fi
done
# Elsewhere on Debian: the same, through a private sources list with non-free.
dir=$(mktemp -d)
mkdir -p "$dir/parts" "$dir/lists/partial"
sed -E 's/^Components:.*/Components: main contrib non-free/' /etc/apt/sources.list.d/debian.sources >"$dir/parts/debian.sources"
opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$dir/parts" -o "Dir::State::Lists=$dir/lists")
apt-get "${opts[@]}" update -qq
DEBIAN_FRONTEND=noninteractive apt-get "${opts[@]}" install -y --no-install-recommends nvidia-cuda-toolkit nvidia-cuda-dev
