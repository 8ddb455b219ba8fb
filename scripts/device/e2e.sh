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
pid=
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
# serve LOG: starts the server (environment as the caller sets it) and waits
# until it answers.
serve() {
	"$sluice" serve --backend "$backend" --model "$bin/e2e-model" --addr "$addr" --max-seqs 32 >"$1" 2>&1 &
	pid=$!
	for _ in $(seq 120); do
		python3 -c "import urllib.request as u; u.urlopen('http://$addr/health', timeout=1)" 2>/dev/null && return 0
		kill -0 $pid 2>/dev/null || break
		sleep 0.5
	done
	echo "server did not come up:"
	tail -n 30 "$1"
	exit 1
}
serve "$out/e2e-server.log"
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
# Device sampling (engine/devsample.go: token ids cross, logits stay on the
# GPU) against the host path, SLUICE_DEVICE_SAMPLE=0 (every logits row read
# back and sampled on the host): the same seeded-temperature SSE run at 32
# clients on this server, then on one restarted with the host path.
sampled() { # sampled LABEL
	"$sluice" bench --url "http://$addr" --concurrency 32 --requests 64 --max-tokens 64 --ignore-eos --temperature 0.8 \
		--label "sluice $backend, $1" --quiet --out "$out/e2e-$1.json"
}
echo "== sampling on the device (default): 32 clients at temperature 0.8"
grep -h "tokens sampled on" "$out/e2e-server.log" || echo "(no device-sampling line: the host path, not the device's)"
sampled device-sample || exit
kill $pid && wait $pid 2>/dev/null
echo "== SLUICE_DEVICE_SAMPLE=0: the same on the host path"
SLUICE_DEVICE_SAMPLE=0 serve "$out/e2e-server-host-sample.log"
grep -h "tokens sampled on" "$out/e2e-server-host-sample.log" || echo "(no device-sampling line: the host path)"
sampled host-sample
