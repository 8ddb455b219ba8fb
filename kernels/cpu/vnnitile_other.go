//go:build !amd64 || noasm

package cpu

import "github.com/sluicehq/sluice/kernels"

// Without the assembly only AMX (itself off here) would tile prompts.
const useVNNITiles = false

var vnniFormats = map[kernels.DType]bool{}

func tiledPrompt(dt kernels.DType) bool {
	_, ok := amxFormats[dt]
	return ok && useAMX
}

func tileDot(c *amxCall) { amxDotTiles(c) }

func vnniDotTiles(c *amxCall) { amxDotTilesGo(c) }
