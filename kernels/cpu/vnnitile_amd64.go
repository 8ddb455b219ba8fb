//go:build amd64 && !noasm

package cpu

import (
	"os"

	"github.com/sluicehq/sluice/kernels"
)

// useVNNITiles: prompt rows take the tiled path on CPUs with AVX-512 VNNI
// but no AMX, for the formats of vnniFormats (issue 26). On the row
// kernels a prompt row costs ~7 vector operations per 64 int8 products;
// here one VPDPBUSD does 64 against a broadcast, as the AMX tiles' product
// does 1024 (vnnitile_amd64.s). SLUICE_VNNI_TILES=0 keeps prompts on the
// row kernels, to compare.
var useVNNITiles = useVNNI512 && !useAMX && os.Getenv("SLUICE_VNNI_TILES") != "0"

// vnniFormats are the tiled formats the VNNI kernels take: all of
// amxFormats.
var vnniFormats = map[kernels.DType]bool{
	kernels.Q6_K: true,
	kernels.Q8_0: true,
	kernels.Q4_0: true,
	kernels.Q5_0: true,
	kernels.Q4_1: true,
	kernels.Q5_1: true,
	kernels.Q4_K: true,
	kernels.Q5_K: true,
}

// tiledPrompt says whether prompt rows of weight type dt take the tiled
// path on this CPU.
func tiledPrompt(dt kernels.DType) bool {
	if _, ok := amxFormats[dt]; ok && useAMX {
		return true
	}
	return useVNNITiles && vnniFormats[dt]
}

// tileDot runs one amxCall on this CPU's tile kernel.
func tileDot(c *amxCall) {
	if useAMX {
		amxDotTiles(c)
		return
	}
	vnniDotTiles(c)
}

// vnniDotTiles is amxDotTiles on VNNI for vnniFormats' calls; its outputs
// are the AMX kernel's bits.
func vnniDotTiles(c *amxCall) {
	if c.hasMin != 0 {
		vnniDotTilesMin(c)
	} else if c.bstep == 16*16 { // Q6_K
		vnniDotTilesPlain16(c)
	} else {
		vnniDotTilesPlain(c)
	}
}

//go:noescape
func vnniDotTilesMin(c *amxCall)

//go:noescape
func vnniDotTilesPlain(c *amxCall)

//go:noescape
func vnniDotTilesPlain16(c *amxCall)

// Q5_0's unpack in assembly needs only AVX-512 BW: as with AMX, the Go form
// would be a large share of a per-call-unpacked Q5_0 prompt.
func init() {
	if useVNNITiles {
		f := amxFormats[kernels.Q5_0]
		f.unpack = unpackQ5_0Fast
		amxFormats[kernels.Q5_0] = f
	}
}
