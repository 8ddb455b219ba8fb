package cpu

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// fma32 is a·b + c rounded once to float32, as VFMADD231PS computes it.
func fma32(a, b, c float32) float32 {
	z := new(big.Float).SetPrec(1000).SetFloat64(float64(a))
	z.Mul(z, new(big.Float).SetPrec(1000).SetFloat64(float64(b)))
	z.Add(z, new(big.Float).SetPrec(1000).SetFloat64(float64(c)))
	f, _ := z.Float32()
	return f
}

// amxDotTilesFMA is amxDotTilesGo with the scaling fused as amx_amd64.s
// fuses it (ROWP/ROWM: f32(C)·(sw·sx) + acc, then sw_min·sx_sum + acc, each
// rounded once): the bit-exact reference of the tile kernels' outputs,
// which amxDotTilesGo's separately rounded products are not.
func amxDotTilesFMA(c *amxCall) {
	step := 16
	if c.hasMin != 0 {
		step = 32
	}
	sw := unsafe.Slice(c.sw, c.nbk*step)
	blockK := c.bstep / 16
	a := unsafe.Slice(c.a, 15*c.astride+(c.nbk-1)*c.akstep+blockK)
	for g := range c.groups {
		img := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(c.b), g*c.gstride)), c.nbk*c.bstep)
		sx := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c.sx), g*c.sgstride)), c.nbk*step)
		rows := 16
		if g == c.groups-1 {
			rows = c.lastRows
		}
		var acc [16][16]float32
		for b := range c.nbk {
			t := img[b*c.bstep:]
			for m := range 16 {
				wrow := a[m*c.astride+b*c.akstep:]
				for n := range 16 {
					var dot int32
					for k := range blockK {
						dot += int32(int8(wrow[k])) * int32(int8(t[(k/4)*64+n*4+k%4]))
					}
					v := fma32(float32(dot), sw[b*step+m]*sx[b*step+n], acc[m][n])
					if c.hasMin != 0 {
						v = fma32(sw[b*step+16+m], sx[b*step+16+n], v)
					}
					acc[m][n] = v
				}
			}
		}
		dst := unsafe.Add(unsafe.Pointer(c.dst), g*c.dgstride)
		for n := range rows {
			for m := range 16 {
				if c.rowMask>>m&1 != 0 {
					*(*float32)(unsafe.Add(dst, n*c.dstride+4*m)) = acc[m][n]
				}
			}
		}
	}
}

// TestVNNITiles checks the VNNI tile kernel bit for bit against the fused
// Go reference (and, on an AMX CPU, against the AMX kernel) over activation
// row counts 1..40, weight tiles of fewer than 16 rows and several K, with
// the weight cache's block-major tiles and the per-call row-major unpack.
// dst cells outside the product must stay untouched.
func TestVNNITiles(t *testing.T) {
	if !useVNNITiles && !useAMX {
		t.Skip("no VNNI tile kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(41, 42))
	var types []kernels.DType
	for dt := range vnniFormats {
		types = append(types, dt)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	kinds := []struct {
		name string
		dot  func(*amxCall)
	}{{"vnni", vnniDotTiles}}
	if useAMX {
		kinds = append(kinds, struct {
			name string
			dot  func(*amxCall)
		}{"amx", amxDotTiles})
	}
	for _, dt := range types {
		k := quantKernels[dt]
		for _, in := range []int{32, 96, 256, 512} {
			if in%dt.BlockElems() != 0 {
				continue
			}
			for _, shape := range [][2]int{{1, 16}, {7, 21}, {16, 48}, {17, 35}, {33, 16}, {40, 19}} {
				n, out := shape[0], shape[1]
				nb := in / dt.BlockElems()
				w := mustQuantize(t, dt, randVec(r, out*in))
				xrb := nb * k.actBlockBytes
				xq := make([]byte, n*xrb)
				for j := range n {
					x := randVec(r, in)
					x[r.IntN(in)] = 30 * float32(j+1)
					k.quantize(xq[j*xrb:(j+1)*xrb], x)
				}
				mul := func(dot func(*amxCall), uncached bool) []float32 {
					var p amxPlan
					p.dot, p.uncached = dot, uncached
					p.size(amxFormats[dt], n, in, 1)
					p.pack(xq, xrb, k.actBlockBytes, 0, n)
					dst := make([]float32, n*out+out)
					for i := range dst {
						dst[i] = float32(math.NaN())
					}
					wt := &tensor{dtype: dt, raw: w}
					mid := min(out, 16)
					p.run(dst[:n*out], out, wt, 0, mid)
					p.run(dst[:n*out], out, wt, mid, out)
					return dst
				}
				want := mul(amxDotTilesFMA, true)
				for _, kind := range kinds {
					for _, uncached := range []bool{true, false} {
						t.Run(fmt.Sprintf("%v/in%d/n%d/out%d/%s/uncached=%v", dt, in, n, out, kind.name, uncached), func(t *testing.T) {
							got := mul(kind.dot, uncached)
							for i := range n * out {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("row %d col %d: %g (%#x), want %g (%#x)", i/out, i%out, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
								}
							}
							for i := n * out; i < len(got); i++ {
								if !math.IsNaN(float64(got[i])) {
									t.Fatalf("dst[%d] = %g written past the product", i, got[i])
								}
							}
						})
					}
				}
			}
		}
	}
}
