#!/usr/bin/env bash
# Installs the pinned grpcurl into .build/bin for the reflection test
# (server/grpc: TestReflectionGrpcurl skips with a message when it is absent).
set -euo pipefail

GRPCURL_VERSION=v1.9.3

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.build/bin"
mkdir -p "$bin"
if [[ -x "$bin/grpcurl" ]] && "$bin/grpcurl" -version 2>&1 | grep -q "${GRPCURL_VERSION#v}"; then
	exit 0
fi
GOBIN="$bin" go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
