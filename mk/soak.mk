# --- Reliability soak (issue 19) ------------------------------------------------
# scripts/soak.sh: the fault-injecting build on loopback, every endpoint under
# a burst and a closed loop with hang-ups, hostile requests, failed steps and a
# SIGTERM + restart; leaks, stream well-formedness and RSS checked at the end
# (bench/soak). `soak` is the full run behind BENCHMARKS.md's RELIABILITY
# figures (about 6 minutes on two busy cores); `soak-short` the same checks
# at a tenth of the streams (about 3 minutes, mostly two model loads and the
# warm-up), too long for `make test`, which runs bench/soak's checker tests.
.PHONY: soak soak-short

soak: $(TOKENIZERS_LIB) $(LLGUIDANCE_LIB)
	./scripts/soak.sh

soak-short: $(TOKENIZERS_LIB) $(LLGUIDANCE_LIB)
	STREAMS=100 CLIENTS=30 PHASE1=20s PHASE2=40s DRAIN=10s OUT=$${OUT:-$${TMPDIR:-/tmp}/sluice-soak-short.json} ./scripts/soak.sh
