//go:build tools

// The CRDs the schemas are generated from ship inside these modules
// (config/crd/...); importing a package pins each module in go.mod.
package tools

import (
	_ "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	_ "sigs.k8s.io/gateway-api/apis/v1"
)
