#!/usr/bin/env bash
# The reliability soak (issue 19): the fault-injecting build of sluice serve on
# loopback; a burst of 1,000 streams over every endpoint (chat, completions,
# responses, messages over HTTP, Generate over gRPC), with whole-response
# requests among them, 30% of the clients hanging up, 10% malformed or
# over-limit requests, slow readers, reconnects with Last-Event-ID, a failed
# engine step every FAULT_EVERY steps and a SIGTERM + restart in the middle;
# then a closed loop on the restarted server (after a warm-up that touches its
# whole KV pool), and at the end leaks, stream well-formedness and RSS over
# the last half of that load are checked (bench/soak). Two API keys share the
# load: each key's share, and no read across keys (a cut stream resumed under
# the other key, a prompt's cached tokens under the other key), are reported
# and checked (bench/soak/keys.go). Bounded in time:
# PHASE1 + warm-up + PHASE2 + DRAIN plus the builds and two model loads (about
# 6 minutes with the defaults on two busy cores). Exits non-zero when a check
# fails. Sizes from the environment:
#   STREAMS=1000 CLIENTS=150 PHASE1=60s PHASE2=150s DRAIN=15s FAULT_EVERY=40 SEED=1
#   OUT=docs/bench/soak.json (the full report, RSS and Go heap samples included)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 CGO_LDFLAGS="-L$PWD/.build/lib" CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -I$PWD/.build/include -Wno-deprecated-declarations}"
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$MODEL" ] || make model
mkdir -p .build/bin
go build -tags faultinject -o .build/bin/sluice-faultinject ./cmd/sluice
go build -o .build/bin/sluice-soak ./bench/soak
echo "soak at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (uncommitted changes)'), $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 'model name' /proc/cpuinfo
grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vnni' | tr '\n' ' '; echo
exec .build/bin/sluice-soak --bin .build/bin/sluice-faultinject --model "$MODEL" \
	--streams "${STREAMS:-1000}" --clients "${CLIENTS:-150}" \
	--phase1 "${PHASE1:-60s}" --phase2 "${PHASE2:-150s}" --drain "${DRAIN:-15s}" \
	--fault-every "${FAULT_EVERY:-40}" --seed "${SEED:-1}" --out "${OUT:-docs/bench/soak.json}"
