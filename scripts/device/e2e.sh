#!/usr/bin/env bash
# The device script's end-to-end stage: sluice serve on the small random HF
# Llama build.sh carries (mkmodel), then sluice bench against it: streams
# over SSE at 8 concurrent clients, and the abandon scenario (clients that
# hang up mid-stream), whose report carries the server's KV reclaim latency
# from /metrics (cancel → blocks back in the pool).
#
#   e2e.sh BIN OUT      BIN holds sluice-cuda and e2e-model/; BACKEND (default
#                       cuda) and SLUICE (default $BIN/sluice-cuda) let the same
#                       script run against the CPU backend where no GPU is
set -uo pipefail
bin=$1 out=$2
sluice=${SLUICE:-$bin/sluice-cuda}
backend=${BACKEND:-cuda}
addr=127.0.0.1:${PORT:-18080}
mkdir -p "$out"
"$sluice" serve --backend "$backend" --model "$bin/e2e-model" --addr "$addr" --max-seqs 32 >"$out/e2e-server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
up=0
for _ in $(seq 120); do
	if python3 -c "import urllib.request as u; u.urlopen('http://$addr/health', timeout=1)" 2>/dev/null; then
		up=1
		break
	fi
	kill -0 $pid 2>/dev/null || break
	sleep 0.5
done
if [ $up = 0 ]; then
	echo "server did not come up:"
	tail -n 30 "$out/e2e-server.log"
	exit 1
fi
echo "== server up ($backend): $(head -n 3 "$out/e2e-server.log" | tr '\n' ' ')"
echo "== SSE streams: 8 clients, 32 requests of 64 tokens"
"$sluice" bench --url "http://$addr" --concurrency 8 --requests 32 --max-tokens 64 --ignore-eos --label "sluice $backend" \
	--quiet --out "$out/e2e-sse.json" || exit
echo "== abandon: 16 clients, 30% hang up after 8 tokens"
"$sluice" bench --url "http://$addr" --scenario abandon --concurrency 16 --requests 48 --max-tokens 128 --ignore-eos \
	--label "sluice $backend" --quiet --out "$out/e2e-abandon.json" || exit
echo "== server metrics"
python3 - "$addr" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=5).read().decode()
for line in text.splitlines():
    if line.startswith(("sluice_kv_reclaim_seconds_count", "sluice_kv_reclaim_seconds_sum")) or (
            line.startswith("sluice_kv_reclaim_seconds_bucket") and 'le="0.01"' in line):
        print("reclaim", line)
PY
