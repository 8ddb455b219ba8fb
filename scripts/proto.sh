#!/usr/bin/env bash
# Regenerates the gRPC endpoint's Go code from server/grpc/proto/*.proto with pinned tools:
#   protoc             from the PyPI package grpcio-tools (python -m grpc_tools.protoc), in a venv
#   protoc-gen-go      google.golang.org/protobuf/cmd/protoc-gen-go (same version as the runtime module)
#   protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc
# Everything installs under .build/ so the system is left alone. The generated
# files are committed; run this (make proto) only after editing a .proto.
set -euo pipefail

GRPCIO_TOOLS_VERSION=1.85.1
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin="$root/.build/bin"
venv="$root/.build/protoc-venv"
mkdir -p "$bin"

if ! "$venv/bin/python" -c "import grpc_tools, importlib.metadata as m; assert m.version('grpcio-tools') == '$GRPCIO_TOOLS_VERSION'" 2>/dev/null; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install --quiet "grpcio-tools==$GRPCIO_TOOLS_VERSION"
fi

# go install rebuilds only when the pinned version changes.
GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

# grpc_tools bundles the well-known types (google/protobuf/*.proto) under its _proto dir.
wkt=$("$venv/bin/python" -c "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))")

# One directory per proto package (sluice/v1, vllm): each is its own Go package.
cd server/grpc/proto
mapfile -t protos < <(find . -name '*.proto' | sort)
PATH="$bin:$PATH" "$venv/bin/python" -m grpc_tools.protoc \
	-I . -I "$wkt" \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"${protos[@]}"
echo "regenerated: $(find . -name '*.pb.go' | sort | tr '\n' ' ')"
