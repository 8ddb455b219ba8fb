#!/usr/bin/env bash
# Assembles every committed PTX module for Hopper (ptxas -arch=sm_90 -v, CUDA
# 11.8's ptxas is enough) and reports each kernel's registers and spills
# against the checked-in baseline, ptxas-sm90.txt. It fails when a kernel of
# the batch-1 decode path (BATCH1 below) spills more than its baseline
# says: a spill there is local-memory traffic on every token. Spills and
# register changes elsewhere are reported, not failed on.
#
#   kernels/cuda/ptxas-check.sh            report, fail on a new batch-1 spill
#   kernels/cuda/ptxas-check.sh -update    rewrite the baseline (commit it,
#                                          saying why a spill is acceptable)
set -euo pipefail
cd "$(dirname "$0")"
PTXAS=${PTXAS:-ptxas}
ARCH=${ARCH:-sm_90}
baseline=ptxas-sm90.txt
# what a batch-1 decode step launches: GEMVs of one row (and their fused
# GLU form), decode attention (with sinks too), the norms, RoPE, residual and activation
# kernels, embedding rows, masking and sampling
BATCH1='^(gemv(_glu)?_[a-z0-9_]+_1|paged_decode_(sink_)?[0-9]+|rope|rope_kv|kv_write|rms_norm|add_rms_norm|head_rms_norm|add|gated_add|swiglu|oai_swiglu|geglu|soft_cap|scale_rows|get_rows_[a-z0-9_]+|mask_logits|sample|topk_logprobs)$'
command -v "$PTXAS" >/dev/null || { echo "ptxas-check: no $PTXAS (scripts/install-cuda.sh)" >&2; exit 1; }
now=$(mktemp)
trap 'rm -f "$now"' EXIT
# one line per kernel: name registers spill-stores spill-loads
for m in ptx/*.ptx; do
	"$PTXAS" -arch="$ARCH" -v "$m" -o /dev/null 2>&1
done | awk '
	/Compiling entry function/ { split($0, q, "\047"); fn = q[2] }
	/spill stores/ { match($0, /[0-9]+ bytes spill stores/); st = substr($0, RSTART, RLENGTH) + 0
		match($0, /[0-9]+ bytes spill loads/); ld = substr($0, RSTART, RLENGTH) + 0 }
	/Used [0-9]+ registers/ { match($0, /Used [0-9]+/); print fn, substr($0, RSTART + 5, RLENGTH - 5) + 0, st, ld }
' | sort >"$now"
[ -s "$now" ] || { echo "ptxas-check: ptxas reported no kernels" >&2; exit 1; }
if [ "${1:-}" = -update ]; then
	{
		echo "# ptxas -arch=$ARCH -v over kernels/cuda/ptx: kernel registers spill-stores spill-loads (bytes)"
		echo "# written by kernels/cuda/ptxas-check.sh -update"
		cat "$now"
	} >"$baseline"
	echo "ptxas-check: $baseline rewritten ($(wc -l <"$now") kernels)"
	exit 0
fi
awk -v batch1="$BATCH1" '
	FNR == NR { if ($1 !~ /^#/) { breg[$1] = $2; bsp[$1] = $3 + $4 }; next }
	{
		k = $1; sp = $3 + $4; hot = k ~ batch1
		n++
		if (sp > 0) { spilling++; printf "spill  %-22s %3d registers, %4d B stored, %4d B loaded%s\n", k, $2, $3, $4, hot ? "  (batch-1 path)" : "" }
		if (!(k in bsp)) { printf "new    %-22s %3d registers, %d B spilled (not in the baseline)\n", k, $2, sp }
		else if ($2 != breg[k]) printf "regs   %-22s %3d registers, baseline %d\n", k, $2, breg[k]
		if (hot && sp > (k in bsp ? bsp[k] : 0)) { bad++; printf "FAIL   %-22s spills %d B, baseline %d B: a new spill in the batch-1 path\n", k, sp, (k in bsp ? bsp[k] : 0) }
		if ($2 > maxr) { maxr = $2; maxk = k }
	}
	END {
		printf "ptxas-check: %d kernels for '"$ARCH"', %d spill; most registers: %s (%d); %s\n", n, spilling, maxk, maxr,
			bad ? bad " new batch-1 spill(s)" : "no new batch-1 spill"
		exit bad > 0
	}
' "$baseline" "$now"
