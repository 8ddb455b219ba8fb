# --- Kubernetes (issue 17) ----------------------------------------------------
# deploy/k8s: the Helm chart, the manifests it renders and the JSON schemas
# they are validated against, all without a cluster. k8s-check runs the tools
# module's tests (deploy/k8s/tools, its own module so that Helm's graph stays
# out of the server's go.mod): `helm template` through the pinned Helm module
# for each variant, equal to the committed manifests; kubeconform (pinned),
# strict, against the vendored schemas only; the objects wired to each other
# and to Sluice's flags and metrics; the schemas regenerated from the pinned
# modules equal to the vendored ones. `make k8s-update` rewrites manifests and
# schemas after a chart or pin change.
.PHONY: k8s-check k8s-update
K8S_TOOLS := deploy/k8s/tools

k8s-check:
	cd $(K8S_TOOLS) && $(GO) mod tidy -diff && $(GO) mod download && $(GO) vet ./... && $(GO) test -count=1 ./...

k8s-update:
	cd $(K8S_TOOLS) && $(GO) mod download && $(GO) test -count=1 ./... -update

test: k8s-check
