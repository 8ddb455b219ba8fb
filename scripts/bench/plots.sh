#!/usr/bin/env bash
# Draws docs/bench/*.png from the JSON reports the other scripts wrote, with
# tools/benchplot (its own Go module, so gonum/plot stays out of Sluice's),
# and writes their Markdown tables to docs/bench/tables.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/docs/bench}
BP=$ROOT/.build/bin/benchplot
mkdir -p "$(dirname "$BP")"
(cd "$ROOT/tools/benchplot" && go build -o "$BP" .)
cd "$OUT"
plot() { echo "+ benchplot $*"; "$BP" "$@" || echo "(chart skipped)" >&2; }
: >tables.md
tab() { # TITLE REPORT...
	printf '\n### %s\n\n' "$1" >>tables.md
	shift
	"$BP" table "$@" >>tables.md
}
if [[ -f sweep-sluice.json && -f sweep-llama-server.json ]]; then
	S=(sweep-sluice.json sweep-llama-server.json)
	tab "Sweep" "${S[@]}"
	plot throughput -title "Output tokens/s vs concurrency" -o throughput.png "${S[@]}"
	for c in ${PLOT_LEVELS:-1 16}; do
		plot cdf -metric ttft -run "c=$c" -title "TTFT, $c concurrent clients" -o "ttft-c$c.png" "${S[@]}"
		plot cdf -metric itl -run "c=$c" -title "Inter-token latency, $c concurrent clients" -o "itl-c$c.png" "${S[@]}"
	done
fi
if [[ -f abandon-abort.json && -f abandon-no-abort.json ]]; then
	A=(abandon-abort.json abandon-no-abort.json)
	L=()
	[[ -f abandon-llama-server.json ]] && L=(abandon-llama-server.json)
	tab "Abandoned requests" "${A[@]}" "${L[@]}"
	plot kv -title "KV cache usage, 30% of clients hang up after 8 tokens" -o abandon-kv.png "${A[@]}"
	plot running -title "Sequences running, 30% of clients hang up after 8 tokens" -o abandon-running.png "${A[@]}" "${L[@]}"
	plot cdf -metric ttft -title "TTFT, 30% of clients hang up after 8 tokens" -o abandon-ttft.png "${A[@]}"
fi
N=()
for f in nginx-direct.json nginx-naive.json nginx-naive-buffered.json nginx-deploy.json; do
	[[ -f $f ]] && N+=("$f")
done
if ((${#N[@]})); then
	tab "nginx" "${N[@]}"
	plot cdf -metric ttft -title "Client TTFT through nginx" -o nginx-ttft.png "${N[@]}"
fi
for f in streams-sluice.json streams-sluice-queue1000.json streams-llama-server.json; do
	[[ -f $f ]] && tab "Held streams: ${f%.json}" "$f"
done
echo "tables: $OUT/tables.md"
