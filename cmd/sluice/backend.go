package main

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// backends maps --backend names to constructors; the cuda build adds its own
// in backend_cuda.go so that the default binary never links CUDA.
var backends = map[string]func(device int) (kernels.Backend, error){}

// backendFactory returns nil for the CPU backend (the loader's default).
func backendFactory(name string, device int) (func() (kernels.Backend, error), error) {
	if name == "cpu" {
		return nil, nil
	}
	mk, ok := backends[name]
	if !ok {
		if name == "cuda" {
			return nil, fmt.Errorf("--backend cuda: this binary was built without CUDA; build bin/sluice-cuda with `make cuda`")
		}
		return nil, fmt.Errorf("--backend %q: unknown (cpu, cuda)", name)
	}
	return func() (kernels.Backend, error) { return mk(device) }, nil
}
