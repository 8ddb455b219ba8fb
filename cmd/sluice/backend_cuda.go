//go:build cuda

package main

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
)

func init() {
	backends["cuda"] = func(device int) (kernels.Backend, error) {
		return cuda.New(cuda.Options{Device: device})
	}
}
