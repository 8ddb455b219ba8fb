package cpu

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/kernels"
)

// The AMX weight cache: each weight's 16-row tiles unpacked to int8 levels
// and f32 scales once, on their first tiled use, and kept beside the
// weight (issue 26).
//
// Why: amxPlan.run unpacked every tile of every weight at every call,
// however few prompt rows the call had. With SmolLM2-135M that was ~130 ms
// a step on 2 threads, so one prompt token beside decoding streams cost
// the step what 16 did and small prefill chunks were not worth taking.
// Cached, a call pays only the activation packing and the tile products.
//
// Layout: a tile's levels are K-block major, 16 rows × blockK bytes per
// block (A's row stride blockK, blockK·16 bytes from one block to the
// next), so each TILELOADD reads 512 (or 256) contiguous bytes; the tile
// products read A through astride and akstep and need no other change.
// The levels and scales are the unpackers' own, so results are the
// per-call path's bits.
//
// Cost: one byte per weight element plus 4 (8 with a min term) bytes of
// scales per K-block row, about 2× a Q4 weight's own bytes
// (AMXCacheBytes); SLUICE_AMX_CACHE=0 turns it off for machines short of
// memory, and the tiles are unpacked per call as before.
var amxCacheOn = os.Getenv("SLUICE_AMX_CACHE") != "0"

// AMXCacheEnabled says whether prompt matmuls on this machine keep their
// weights' unpacked tiles: the CPU takes the tiled prompt path (AMX, or
// AVX-512 VNNI without AMX: vnnitile_amd64.go, which reads the same cache)
// and SLUICE_AMX_CACHE is not 0.
func AMXCacheEnabled() bool { return (useAMX || useVNNITiles) && amxCacheOn }

// AMXCacheBytes is what the cache holds for a [rows, cols] weight of type
// dt once a prompt has used it, or 0 for a type the tiled path does not
// take: levels for whole 16-row tiles and their f32 scales (and mins).
func AMXCacheBytes(dt kernels.DType, rows, cols int) int64 {
	f, ok := amxFormats[dt]
	if !ok || cols%dt.BlockElems() != 0 {
		return 0
	}
	tiles := int64(rows+15) / 16
	return tiles * (16*int64(cols) + 4*int64(cols/f.blockK*amxStep(f)))
}

func amxStep(f amxFormat) int {
	if f.hasMin {
		return 32
	}
	return 16
}

// amxCache is one weight's unpacked tiles.
type amxCache struct {
	k, blockK, nbk, step int
	rows                 int       // the weight's rows
	lv                   []byte    // tile t's levels at lv[t·16·k:]
	sc                   []float32 // tile t's scales at sc[t·nbk·step:], as amxPlan.run's sc
	// state[t] is amxTileEmpty, amxTileFilling (one goroutine unpacks it;
	// the others unpack their own copy meanwhile) or amxTileReady (lv and
	// sc of tile t are written and never change again).
	state []atomic.Uint32
}

const (
	amxTileEmpty uint32 = iota
	amxTileFilling
	amxTileReady
)

// amxCacheSlot hangs a weight's cache off its tensor, made on first use.
type amxCacheSlot struct {
	once sync.Once
	c    *amxCache
}

// amxCacheOf returns wt's cache for the plan's format and row length, or
// nil where it is off or does not fit this call (a call with another K).
func (p *amxPlan) amxCacheOf(wt *tensor) *amxCache {
	if !amxCacheOn || p.uncached {
		return nil
	}
	wrb := wt.dtype.RowBytes(p.k)
	wt.amx.once.Do(func() {
		rows := len(wt.raw) / wrb
		if wt.layout != nil { // raw holds its last group's padding rows too (x16pack.go)
			rows = wt.rows()
		}
		if rows == 0 || wt.layout == nil && rows*wrb != len(wt.raw) {
			return
		}
		tiles := (rows + 15) / 16
		c := &amxCache{k: p.k, blockK: p.f.blockK, nbk: p.nbk, step: p.step, rows: rows}
		c.lv = make([]byte, tiles*16*p.k)
		c.sc = make([]float32, tiles*p.nbk*p.step)
		c.state = make([]atomic.Uint32, tiles)
		wt.amx.c = c
	})
	c := wt.amx.c
	if c == nil || c.k != p.k || c.blockK != p.f.blockK || c.step != p.step {
		return nil
	}
	return c
}

// tile returns tile t's levels and scales from the cache, unpacking them
// into it from w first if no one has. ok is false while another goroutine
// fills it: the caller unpacks its own copy (the same bits) meanwhile.
func (c *amxCache) tile(t int, p *amxPlan, s *amxScratch, wt *tensor, nb int) (lv []byte, sc []float32, ok bool) {
	lv = c.lv[t*16*c.k : (t+1)*16*c.k]
	sc = c.sc[t*c.nbk*c.step : (t+1)*c.nbk*c.step]
	st := &c.state[t]
	if st.Load() == amxTileReady {
		return lv, sc, true
	}
	if !st.CompareAndSwap(amxTileEmpty, amxTileFilling) {
		return nil, nil, false
	}
	rows := min(16, c.rows-16*t)
	astride := p.k + 64
	wrb := wt.dtype.RowBytes(p.k)
	slv, ssc := p.unpackTile(s, wt.canonicalRows(&s.canon, 16*t, 16*t+rows, wrb), wrb, rows, nb, astride)
	for b := range c.nbk {
		blk := lv[b*16*c.blockK : (b+1)*16*c.blockK]
		for m := range rows {
			copy(blk[m*c.blockK:(m+1)*c.blockK], slv[m*astride+b*c.blockK:])
		}
	}
	copy(sc, ssc)
	st.Store(amxTileReady)
	return lv, sc, true
}
