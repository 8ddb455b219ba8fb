# --- Kubernetes (issue 17) ----------------------------------------------------
# deploy/k8s: the Helm chart, the manifests it renders and the JSON schemas
# they are validated against, all without a cluster. k8s-check runs the tools
# module's tests (deploy/k8s/tools, its own module so that Helm's graph stays
# out of the server's go.mod): `helm template` through the pinned Helm module
# for each variant, equal to the committed manifests; kubeconform (pinned),
# strict, against the vendored schemas only; the objects wired to each other
# and to Sluice's flags and metrics; the security settings (securityContext,
# no token, the key Secret, the NetworkPolicies, the images' numeric USER,
# issue 30); the schemas regenerated from the pinned
# modules equal to the vendored ones. `make k8s-update` rewrites manifests and
# schemas after a chart or pin change.
.PHONY: k8s-check k8s-update kvevents-check
K8S_TOOLS := deploy/k8s/tools
# kvevents-check has libzmq (pyzmq's bundled 4.3.x, what llm-d's indexer
# links) subscribe to the pure-Go KV-event publisher, and Python's msgpack
# and msgspec (in vLLM's event structs) decode it, from a pinned venv
# (.build/py-kvevents).
KVEVENTS_PY_PINS := pyzmq==27.3.0 msgpack==1.2.4 msgspec==0.22.0

k8s-check:
	cd $(K8S_TOOLS) && $(GO) mod tidy -diff && $(GO) mod download && $(GO) vet ./... && $(GO) test -count=1 ./...

k8s-update:
	cd $(K8S_TOOLS) && $(GO) mod download && $(GO) test -count=1 ./... -update

kvevents-check:
	SLUICE_KVEVENTS_PYTHON="$$(./scripts/py-venv.sh kvevents $(KVEVENTS_PY_PINS))" $(GO) test -count=1 -run Libzmq ./kvevents/

test: k8s-check kvevents-check
