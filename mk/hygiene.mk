# --- Hygiene CI enforces ------------------------------------------------------
# go.mod is tidy (a direct dependency is never `// indirect`), in every module;
# the committed protobuf code is what the pinned generators produce from the
# .proto files (as cuda-check does for the PTX); tools/benchplot, a module of
# its own so gonum/plot stays out of the server's graph, builds and vets;
# every tracked Go file is gofmt-clean.
.PHONY: hygiene tidy-check proto-check benchplot-check gofmt-check
BENCHPLOT_DIR := tools/benchplot

hygiene: gofmt-check tidy-check proto-check benchplot-check

tidy-check:
	$(GO) mod tidy -diff
	cd $(BENCHPLOT_DIR) && $(GO) mod tidy -diff

proto-check: proto
	git diff --exit-code --stat -- server/grpc/proto || { echo "server/grpc/proto is stale: commit what make proto generated"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- server/grpc/proto); \
	if [ -n "$$untracked" ]; then echo "make proto generated uncommitted files: $$untracked"; exit 1; fi

benchplot-check:
	cd $(BENCHPLOT_DIR) && $(GO) build -o /dev/null . && $(GO) vet ./...

test: hygiene

gofmt-check:
	@bad=$$(git ls-files -z '*.go' | xargs -0 gofmt -l); \
	if [ -n "$$bad" ]; then echo "not gofmt-clean (run gofmt -w):"; echo "$$bad"; exit 1; fi
