package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestAMXCacheMatchesPerCall: for every weight type the tiled path takes,
// the tiles kept in a weight's cache give the bits the per-call unpack
// gives (the Go tile product everywhere, the AMX one where the CPU has it),
// with the cache filled and read by four goroutines at once, each with its
// own plan and starting at a different tile, then read again filled; a
// weight whose last tile has fewer than 16 rows; and a tile another
// goroutine is still filling, which the caller unpacks for itself.
func TestAMXCacheMatchesPerCall(t *testing.T) {
	if !amxCacheOn {
		t.Skip("SLUICE_AMX_CACHE=0")
	}
	r := rand.New(rand.NewPCG(51, 52))
	var types []kernels.DType
	for dt := range amxFormats {
		types = append(types, dt)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	kinds := []struct {
		name string
		dot  func(*amxCall)
	}{{"go", amxDotTilesGo}}
	if useAMX {
		kinds = append(kinds, struct {
			name string
			dot  func(*amxCall)
		}{"amx", amxDotTiles})
	}
	for _, dt := range types {
		k := quantKernels[dt]
		f := amxFormats[dt]
		for _, in := range []int{256, 512} {
			for _, shape := range [][2]int{{21, 35}, {1, 64}} {
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
				newPlan := func(dot func(*amxCall), uncached bool) *amxPlan {
					p := &amxPlan{dot: dot, uncached: uncached}
					p.size(f, n, in, 1)
					p.pack(xq, xrb, k.actBlockBytes, 0, n)
					return p
				}
				tiles := (out + 15) / 16
				// runTiles runs every tile once, as matMul's chunks would,
				// starting at tile first.
				runTiles := func(p *amxPlan, wt *tensor, first int) []float32 {
					dst := make([]float32, n*out)
					for i := range tiles {
						lo := 16 * ((first + i) % tiles)
						p.run(dst, out, wt, lo, min(out, lo+16))
					}
					return dst
				}
				for _, kind := range kinds {
					t.Run(fmt.Sprintf("%v/in%d/n%d/out%d/%s", dt, in, n, out, kind.name), func(t *testing.T) {
						want := runTiles(newPlan(kind.dot, true), &tensor{dtype: dt, raw: w}, 0)
						same := func(what string, got []float32) {
							t.Helper()
							for i := range want {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("%s: activation %d row %d: cached %v, per call %v", what, i/out, i%out, got[i], want[i])
								}
							}
						}
						wt := &tensor{dtype: dt, raw: w}
						const goroutines = 4
						got := make([][]float32, goroutines)
						var wg sync.WaitGroup
						for g := range goroutines {
							wg.Go(func() { got[g] = runTiles(newPlan(kind.dot, false), wt, g) })
						}
						wg.Wait()
						for g := range goroutines {
							same(fmt.Sprintf("goroutine %d filling", g), got[g])
						}
						c := wt.amx.c
						if c == nil {
							t.Fatal("no cache was made")
						}
						for i := range c.state {
							if c.state[i].Load() != amxTileReady {
								t.Fatalf("tile %d of %d not cached", i, tiles)
							}
						}
						same("filled", runTiles(newPlan(kind.dot, false), wt, 1))

						// A tile held by a filler that has not finished: its
						// cached bytes are garbage until then, so they must
						// not be read.
						busy := &tensor{dtype: dt, raw: w}
						p := newPlan(kind.dot, false)
						p.amxCacheOf(busy)
						last := &busy.amx.c.state[tiles-1]
						last.Store(amxTileFilling)
						lv := busy.amx.c.lv[(tiles-1)*16*in:]
						for i := range 16 * in {
							lv[i] = 0x7f
						}
						same("tile being filled", runTiles(p, busy, 0))
						if last.Load() != amxTileFilling {
							t.Fatal("a tile another goroutine was filling was filled again")
						}
					})
				}
			}
		}
	}
}

// TestAMXCacheBytes: the figure reported for a weight is what its cache
// allocates.
func TestAMXCacheBytes(t *testing.T) {
	if !amxCacheOn {
		t.Skip("SLUICE_AMX_CACHE=0")
	}
	r := rand.New(rand.NewPCG(53, 54))
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0, kernels.Q6_K} {
		in, out := 512, 40
		wt := &tensor{dtype: dt, raw: mustQuantize(t, dt, randVec(r, out*in))}
		p := &amxPlan{}
		p.size(amxFormats[dt], 1, in, 1)
		c := p.amxCacheOf(wt)
		if got, want := int64(len(c.lv)+4*len(c.sc)), AMXCacheBytes(dt, out, in); got != want {
			t.Errorf("%v: cache of %d bytes, AMXCacheBytes says %d", dt, got, want)
		}
	}
	if AMXCacheBytes(kernels.F16, 64, 64) != 0 {
		t.Error("F16 weights are not tiled, so they cache nothing")
	}
}

// TestAMXCacheEnabledFollowsTiledPath: the cache is reported on wherever
// the tiled prompt path fills it, the VNNI tiles of a CPU without AMX
// included (sluice inspect's memory figure reads it).
func TestAMXCacheEnabledFollowsTiledPath(t *testing.T) {
	if want := (useAMX || useVNNITiles) && amxCacheOn; AMXCacheEnabled() != want {
		t.Errorf("AMXCacheEnabled() = %v with AMX %v, VNNI tiles %v, cache %v", AMXCacheEnabled(), useAMX, useVNNITiles, amxCacheOn)
	}
}
