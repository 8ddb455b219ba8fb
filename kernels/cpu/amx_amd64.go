//go:build amd64 && !noasm

package cpu

//go:generate python3 amx_amd64_gen.py

import (
	"os"
	"syscall"

	"golang.org/x/sys/cpu"

	"github.com/sluicehq/sluice/kernels"
)

// useAMX: the CPU has AMX-INT8 (and the AVX-512 the scaling and scatter
// use), and Linux granted this process the tile data state, which it asks
// for explicitly (arch_prctl ARCH_REQ_XCOMP_PERM) because the 8 KiB of
// tile registers grow every signal frame. SLUICE_AMX=0 turns the path off,
// to compare with the VNNI kernels.
var useAMX = cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && useVNNI512 &&
	os.Getenv("SLUICE_AMX") != "0" && requestTileData()

func requestTileData() bool {
	const (
		archReqXcompPerm = 0x1023
		xfeatureTileData = 18
	)
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureTileData, 0)
	return errno == 0
}

// amxDotTiles runs one amxCall with TDPBSSD (amx_amd64.s). The tiles are
// configured and released inside the call, so no goroutine ever leaves an
// assembly function holding tile state (and a goroutine is never
// preempted inside one: assembly has no asynchronous safe points).
func amxDotTiles(c *amxCall) {
	if c.hasMin != 0 {
		amxDotTilesMin(c)
	} else {
		amxDotTilesPlain(c)
	}
}

//go:noescape
func amxDotTilesPlain(c *amxCall)

//go:noescape
func amxDotTilesMin(c *amxCall)

//go:noescape
func unpackQ5_0AVX512(lv *byte, lstride int, half *uint16, step int, w *byte, wstride, rows, nb int)

// unpackQ5_0Fast is unpackQ5_0 in assembly (amxunpack_amd64.s): the Go
// form was an eighth of a 2-thread Gemma 3 prompt, whose q, k, v, gate and
// up projections are all Q5_0.
func unpackQ5_0Fast(img levels, sc []float32, step int, w []byte, wstride, rows, nb int) {
	if rows == 0 || nb == 0 {
		return
	}
	_ = w[(rows-1)*wstride+nb*22-1]
	_ = img.lv[(rows-1)*img.stride+nb*32-1]
	_ = img.half[(nb-1)*step+rows-1]
	unpackQ5_0AVX512(&img.lv[0], img.stride, &img.half[0], step, &w[0], wstride, rows, nb)
}

func init() {
	if useAMX {
		f := amxFormats[kernels.Q5_0]
		f.unpack = unpackQ5_0Fast
		amxFormats[kernels.Q5_0] = f
	}
}
