package cpu

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Tiled prompt matmuls (AMX on amd64; amxDotTiles' pure-Go form elsewhere
// and as the test reference).
//
// Why: a prompt chunk multiplies every weight row with tens to hundreds of
// activation rows. The VNNI kernels spend ~7 vector operations per 64
// int8 products, once the weights are unpacked, and that bound the prompt
// speed (Gemma 3 270M: 0.95× llama.cpp, 46% of the time in Q5_0 rows8).
// An AMX TDPBSSD does 16×16×32 int8 products in one instruction. The
// blocks' scales still differ per 32 (or 16) elements, so each block's
// int32 tile is stored and scaled into f32 accumulators as ggml's integer
// block sums are: the integers are exact, only the float order differs
// from the row kernels.
//
// Layout: the weights are tile A, 16 rows of one block's signed levels,
// unpacked once per weight into its cache (amxcache.go; per call into a
// row-major scratch of 16 × K bytes where the cache is off) and reused by
// every group of activation rows; the activations are tile B, 16 rows in
// the VNNI pair layout (B[k/4][n·4 + k%4]), packed once per call. C[m][n]
// is weight row m times activation row n: the 16 accumulators (one per
// weight row, a lane per activation row) are transposed in registers once
// per tile and group, so each activation row's 16 outputs are one store.
// The other two layouts measured worse: activations as A needed the
// weights transposed into the VNNI layout at every unpack (as long as the
// tile products themselves), and weights as A with a 16-way scatter of
// each accumulator to dst took half the time.

// amxFormat is how a weight type is tiled: its K-block size (32, or 16 for
// Q6_K's sub-blocks), whether its blocks carry a min term (Q4_1, Q5_1,
// Q4_K, Q5_K: Σ min·Σx, taken from the activation's sums), its unpacker,
// and whether that leaves the scales as the blocks' f16 bits (converted
// afterwards in one vector pass: a 256 KiB table lookup per block missed
// the cache often enough to cost as much as the unpack).
type amxFormat struct {
	blockK     int
	hasMin     bool
	unpack     amxUnpack
	halfScales bool
}

// amxUnpack writes the signed levels of weight rows [0, rows) (rows ≤ 16) to
// img and their per-K-block scales to sc (or, with halfScales, their f16
// bits to img.half, laid out the same): block b's 16 scales at
// sc[b*step:], then its 16 mins (if any) at sc[b*step+16:]. w holds the
// quantized rows, wstride bytes apart; nb is the weight type's blocks per
// row.
type amxUnpack func(img levels, sc []float32, step int, w []byte, wstride, rows, nb int)

var amxFormats = map[kernels.DType]amxFormat{
	kernels.Q8_0: {32, false, unpackQ8_0, true},
	kernels.Q4_0: {32, false, unpackQ4_0, true},
	kernels.Q5_0: {32, false, unpackQ5_0, true},
	kernels.Q4_1: {32, true, unpackQ4_1, true},
	kernels.Q5_1: {32, true, unpackQ5_1, true},
	kernels.Q4_K: {32, true, unpackQ4_K, false},
	kernels.Q5_K: {32, true, unpackQ5_K, false},
	kernels.Q6_K: {16, false, unpackQ6_K, false},
}

// amxCall is one call of amxDotTiles: one tile of 16 weight rows against
// every group of 16 activation rows. The assembly reads it by offset: keep
// the field order and the 8-byte fields.
type amxCall struct {
	cfg      *amxConfig
	a        *byte // the weight levels, 16 rows astride apart
	astride  int
	akstep   int      // bytes from one K-block to the next in a row (blockK; blockK·16 in the cache's block-major tiles)
	sw       *float32 // weight scales (and mins), step floats a block
	b        *byte    // group 0's activation tiles
	bstep    int      // bytes a K-block of a group's tiles (blockK·16)
	gstride  int      // bytes from one group's tiles to the next
	sx       *float32 // group 0's activation scales (and sums), step floats a block
	sgstride int      // bytes from one group's scales to the next
	nbk      int      // K-blocks
	groups   int
	dst      *float32 // dst of activation row 0, weight row 0
	dstride  int      // bytes from one activation row's dst to the next (out·4)
	dgstride int      // bytes from one group's first dst row to the next (16·out·4)
	lastRows int      // valid activation rows of the last group
	rowMask  int      // valid weight rows, as a bit mask
	cbuf     *int32   // four 16×16 int32 stored C tiles
	hasMin   int
}

// amxConfig is the 64-byte tile configuration LDTILECFG reads: palette 1,
// tmm0..3 C tiles, tmm4/5 A, tmm6/7 B (four blocks in flight).
type amxConfig struct {
	palette  uint8
	startRow uint8
	_        [14]byte
	colsb    [16]uint16
	rows     [16]uint8
}

func newAMXConfig(blockK int) *amxConfig {
	c := &amxConfig{palette: 1}
	for i := range 4 {
		c.colsb[i], c.rows[i] = 64, 16 // C: 16 × 16 int32
	}
	for i := range 2 {
		c.colsb[4+i], c.rows[4+i] = uint16(blockK), 16  // A: 16 weight rows × blockK levels
		c.colsb[6+i], c.rows[6+i] = 64, uint8(blockK/4) // B: blockK/4 rows of 16 activation rows × 4 int8s
	}
	return c
}

var amxConfigs = map[int]*amxConfig{32: newAMXConfig(32), 16: newAMXConfig(16)}

// levels is a weight tile scratch: level k of weight row m at
// lv[m·stride + k], and the blocks' f16 scales for halfScales formats.
type levels struct {
	lv     []byte
	stride int
	half   []uint16
}

// put8 stores levels e..e+7 of weight row m < 16, packed in v. It is the
// unpackers' inner store, so one bounds check covers the eight bytes.
func (l levels) put8(m, e int, v uint64) {
	o := m*l.stride + e
	_ = l.lv[o+7]
	*(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(l.lv)), o)) = v
}

// amxScratch is one thread's weight unpack space. A plan keeps one per
// thread, claimed by whichever thread runs a chunk: a sync.Pool lost them
// at every GC, and reallocating 40 KiB a chunk was 1,100 allocations a
// 2-thread Gemma 3 prompt.
type amxScratch struct {
	busy  atomic.Bool
	lv    []byte
	sc    []float32
	half  []uint16
	canon []byte      // a grouped weight's tile rows, in the file's layout (x16pack.go)
	cbuf  [1024]int32 // four stored C tiles
	call  amxCall
}

// claim returns a scratch no other thread holds; release it when done. At
// most len(scratch) threads run chunks at once, so one is always free.
func (p *amxPlan) claim() *amxScratch {
	for {
		for i := range p.scratch {
			if s := &p.scratch[i]; !s.busy.Load() && s.busy.CompareAndSwap(false, true) {
				return s
			}
		}
	}
}

// amxPlan is matMul's per-call state for the tiled path: the activation
// rows and scales, shared read-only by the threads.
type amxPlan struct {
	f      amxFormat
	k      int // elements per row
	n      int // activation rows
	nbk    int
	groups int
	step   int    // floats a K-block in sw and sx
	img    []byte // the groups' B tiles
	sx     []float32
	dot    func(*amxCall) // amxDotTiles; the tests swap in amxDotTilesGo

	uncached bool // unpack per call even where the weight cache is on (the tests' reference)

	scratch []amxScratch // one per thread (size)
}

// size sets the plan up for n activation rows of k elements: buffers, and
// the last group's padding rows zeroed.
func (p *amxPlan) size(f amxFormat, n, k, threads int) {
	p.f, p.k, p.n = f, k, n
	if len(p.scratch) < threads {
		p.scratch = make([]amxScratch, threads)
	}
	p.nbk = k / f.blockK
	p.groups = (n + 15) / 16
	p.step = 16
	if f.hasMin {
		p.step = 32
	}
	bstep := f.blockK * 16
	needImg := p.groups * p.nbk * bstep
	if cap(p.img) < needImg {
		p.img = make([]byte, needImg)
	}
	p.img = p.img[:needImg]
	needSx := p.groups * p.nbk * p.step
	if cap(p.sx) < needSx {
		p.sx = make([]float32, needSx)
	}
	p.sx = p.sx[:needSx]
	if n%16 != 0 {
		clear(p.img[(p.groups-1)*p.nbk*bstep:])
		clear(p.sx[(p.groups-1)*p.nbk*p.step:])
	}
}

// pack copies quantized activation rows [lo, hi) of xq (rows of xrb bytes,
// in the weight type's partner format of bb bytes a block) into the B
// tiles of their groups, with their scales. Rows of one group may be packed
// by different threads: each writes only its own lanes.
func (p *amxPlan) pack(xq []byte, xrb, bb, lo, hi int) {
	f := p.f
	bstep := f.blockK * 16
	dwords := f.blockK / 4
	for i := lo; i < hi; i++ {
		g, nn := i/16, i%16
		row := xq[i*xrb : (i+1)*xrb]
		img := p.img[g*p.nbk*bstep : (g+1)*p.nbk*bstep]
		sx := p.sx[g*p.nbk*p.step:]
		for b := range p.nbk {
			off, scale, sum := actBlock(row, bb, f.blockK, b, f.hasMin)
			src := row[off : off+f.blockK]
			t := img[b*bstep : (b+1)*bstep]
			for kk := range dwords {
				binary.LittleEndian.PutUint32(t[kk*64+nn*4:], binary.LittleEndian.Uint32(src[4*kk:]))
			}
			sx[b*p.step+nn] = scale
			if f.hasMin {
				sx[b*p.step+16+nn] = sum
			}
		}
	}
}

// actBlock locates K-block b (of blockK elements) of a quantized activation
// row in format bb: the offset of its int8s, its scale and, with min, the
// scale times the sum of its int8s (what a block's min multiplies).
func actBlock(row []byte, bb, blockK, b int, withMin bool) (off int, scale, sum float32) {
	switch bb {
	case quant.Q8_0BlockBytes:
		blk := row[b*bb:]
		return b*bb + 2, f16le(blk), 0
	case quant.Q8_1BlockBytes:
		blk := row[b*bb:]
		return b*bb + 4, f16le(blk), f16le(blk[2:])
	}
	per := 256 / blockK // Q8_K: K-blocks a super-block
	sb, j := b/per, b%per
	blk := row[sb*bb:]
	d := q8KScale(blk)
	if withMin { // blockK 32: two of the super-block's 16-element sums
		sum = d * float32(q8KBsum(blk, 2*j)+q8KBsum(blk, 2*j+1))
	}
	return sb*bb + 4 + j*blockK, d, sum
}

// run computes output columns [lo, hi) for every activation row, a tile of
// 16 weight rows at a time; dst holds n rows of out. The tiles come from
// the weight's cache (amxcache.go), or are unpacked here where it is off.
func (p *amxPlan) run(dst []float32, out int, wt *tensor, lo, hi int) {
	s := p.claim()
	defer s.busy.Store(false)
	astride := p.k + 64 // off the 4 KiB stride, so 16 rows do not share L1 sets
	if need := 16 * astride; cap(s.lv) < need {
		s.lv = make([]byte, need)
	}
	nsc := p.nbk * p.step
	if cap(s.sc) < nsc {
		s.sc, s.half = make([]float32, nsc), make([]uint16, nsc)
	}
	dt := wt.dtype
	wrb := dt.RowBytes(p.k)
	nb := p.k / dt.BlockElems()
	bstep := p.f.blockK * 16
	cache := p.amxCacheOf(wt)
	// The call lives in the scratch: handed to p.dot (a func value) a
	// local would escape, one allocation a chunk.
	c := &s.call
	*c = amxCall{
		cfg: amxConfigs[p.f.blockK], b: &p.img[0], bstep: bstep, gstride: p.nbk * bstep,
		sx: &p.sx[0], sgstride: p.nbk * p.step * 4, nbk: p.nbk, groups: p.groups,
		dstride: out * 4, dgstride: 16 * out * 4, lastRows: p.n - 16*(p.groups-1),
		cbuf: &s.cbuf[0],
	}
	if p.f.hasMin {
		c.hasMin = 1
	}
	for o0 := lo; o0 < hi; o0 += 16 {
		rows := min(16, hi-o0)
		var lv []byte
		var sc []float32
		ok := false
		// A cached tile is a whole one: a range that split a tile (never
		// matMul's, whose chunks are whole tiles) unpacks its own rows.
		if cache != nil && o0%16 == 0 && rows == min(16, cache.rows-o0) {
			lv, sc, ok = cache.tile(o0/16, p, s, wt, nb)
		}
		if ok {
			c.a, c.astride, c.akstep = &lv[0], p.f.blockK, bstep
		} else {
			lv, sc = p.unpackTile(s, wt.canonicalRows(&s.canon, o0, o0+rows, wrb), wrb, rows, nb, astride)
			c.a, c.astride, c.akstep = &lv[0], astride, p.f.blockK
		}
		c.sw = &sc[0]
		c.rowMask = 1<<rows - 1
		c.dst = &dst[o0]
		if p.dot != nil {
			p.dot(c)
		} else {
			tileDot(c)
		}
	}
}

// unpackTile unpacks weight rows [0, rows) of w (rows ≤ 16, wrb bytes apart)
// into s: their levels astride bytes apart, and their f32 scales.
func (p *amxPlan) unpackTile(s *amxScratch, w []byte, wrb, rows, nb, astride int) ([]byte, []float32) {
	nsc := p.nbk * p.step
	lv, sc, half := s.lv[:16*astride], s.sc[:nsc], s.half[:nsc]
	p.f.unpack(levels{lv, astride, half}, sc, p.step, w, wrb, rows, nb)
	if p.f.halfScales {
		clear(sc)
		axpyHalf(sc, 1, half) // exact: 1·x + 0
	}
	return lv, sc
}

// amxDotTilesGo is amxDotTiles in Go: the reference for the assembly, and
// its definition off amd64.
func amxDotTilesGo(c *amxCall) {
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
		var acc [16][16]float32 // [weight row][activation row]
		for b := range c.nbk {
			t := img[b*c.bstep:]
			for m := range 16 {
				wrow := a[m*c.astride+b*c.akstep:]
				for n := range 16 {
					var dot int32
					for k := range blockK {
						dot += int32(int8(wrow[k])) * int32(int8(t[(k/4)*64+n*4+k%4]))
					}
					v := float32(dot)*(sw[b*step+m]*sx[b*step+n]) + acc[m][n]
					if c.hasMin != 0 {
						v = sw[b*step+16+m]*sx[b*step+16+n] + v
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

// Unpackers. Each writes blockK signed levels per K-block, eight at a time
// through a uint64 where the layout allows it.

const lowNibbles = 0x0f0f0f0f0f0f0f0f

// spreadBits[v] has byte i = 0x10 where bit i of v is set: the fifth bit
// of eight Q5 levels.
var spreadBits = func() (t [256]uint64) {
	for v := range 256 {
		for i := range 8 {
			if v>>i&1 != 0 {
				t[v] |= 0x10 << (8 * i)
			}
		}
	}
	return t
}()

func get64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// biased turns eight unsigned levels v (each < 2^bits) into v − 2^(bits−1)
// as int8s: the top bit clear means negative, so it becomes the sign fill.
func biased(v uint64, bits uint) uint64 {
	half := uint64(0x0101010101010101) << (bits - 1)
	low := half - 0x0101010101010101 // the bits below the top one
	neg := (^v & half) >> (bits - 1) * (0xff &^ (low & 0xff))
	return v&low | neg
}

func unpackQ8_0(img levels, sc []float32, step int, w []byte, wstride, rows, nb int) {
	for b := range nb {
		for r := range rows {
			wr := w[r*wstride:]
			blk := wr[b*34 : b*34+34]
			img.half[b*step+r] = binary.LittleEndian.Uint16(blk)
			for i := 0; i < 32; i += 8 {
				img.put8(r, b*32+i, get64(blk[2+i:]))
			}
		}
	}
}

// unpackLegacy makes the unpacker of a 32-element legacy type: blocks of
// [d (m) (qh) qs16], nibbles with an optional fifth bit from qh, signed
// (q − 8 or q − 16, no min) or unsigned (with the min m).
func unpackLegacy(hasMin, fifthBit bool) amxUnpack {
	bits, qs := uint(4), 2
	if hasMin {
		qs += 2
	}
	qhAt := qs
	if fifthBit {
		bits, qs = 5, qs+4
	}
	bb := qs + 16
	return func(img levels, sc []float32, step int, w []byte, wstride, rows, nb int) {
		for b := range nb {
			for r := range rows {
				blk := w[r*wstride+b*bb : r*wstride+(b+1)*bb]
				img.half[b*step+r] = binary.LittleEndian.Uint16(blk)
				if hasMin {
					img.half[b*step+16+r] = binary.LittleEndian.Uint16(blk[2:])
				}
				var qh uint32
				if fifthBit {
					qh = binary.LittleEndian.Uint32(blk[qhAt:])
				}
				q0, q1 := get64(blk[qs:]), get64(blk[qs+8:])
				for i, v := range [4]uint64{q0 & lowNibbles, q1 & lowNibbles, q0 >> 4 & lowNibbles, q1 >> 4 & lowNibbles} {
					v |= spreadBits[qh>>(8*i)&0xff] // zero without a fifth bit
					if !hasMin {
						v = biased(v, bits)
					}
					img.put8(r, b*32+8*i, v)
				}
			}
		}
	}
}

var (
	unpackQ4_0 = unpackLegacy(false, false)
	unpackQ5_0 = unpackLegacy(false, true)
	unpackQ4_1 = unpackLegacy(true, false)
	unpackQ5_1 = unpackLegacy(true, true)
)

// kScales writes a Q4_K/Q5_K super-block's eight sub-block scales d·sc and
// negated mins −dmin·m (the min term is subtracted) for row r.
func kScales(sc []float32, step, sb, r int, blk []byte) {
	d, dmin := f16le(blk), f16le(blk[2:])
	for j := range 8 {
		s, m := quant.ScaleMinK4(j, blk[4:16])
		b := sb*8 + j
		sc[b*step+r] = d * float32(s)
		sc[b*step+16+r] = -dmin * float32(m)
	}
}

func unpackQ4_K(img levels, sc []float32, step int, w []byte, wstride, rows, nb int) {
	for sb := range nb {
		for r := range rows {
			wr := w[r*wstride:]
			blk := wr[sb*144 : sb*144+144]
			kScales(sc, step, sb, r, blk)
			for c := range 4 {
				q := blk[16+32*c : 16+32*c+32]
				for i := 0; i < 32; i += 8 {
					v := get64(q[i:])
					img.put8(r, sb*256+64*c+i, v&lowNibbles)
					img.put8(r, sb*256+64*c+32+i, v>>4&lowNibbles)
				}
			}
		}
	}
}

func unpackQ5_K(img levels, sc []float32, step int, w []byte, wstride, rows, nb int) {
	for sb := range nb {
		for r := range rows {
			wr := w[r*wstride:]
			blk := wr[sb*176 : sb*176+176]
			kScales(sc, step, sb, r, blk)
			qh, ql := blk[16:48], blk[48:176]
			for c := range 4 {
				q := ql[32*c : 32*c+32]
				for i := 0; i < 32; i += 8 {
					v, h := get64(q[i:]), get64(qh[i:])
					img.put8(r, sb*256+64*c+i, v&lowNibbles|(h>>(2*c)&0x0101010101010101)<<4)
					img.put8(r, sb*256+64*c+32+i, v>>4&lowNibbles|(h>>(2*c+1)&0x0101010101010101)<<4)
				}
			}
		}
	}
}

func unpackQ6_K(img levels, sc []float32, step int, w []byte, wstride, rows, nb int) {
	const two = 0x0303030303030303
	for sb := range nb {
		for r := range rows {
			wr := w[r*wstride:]
			blk := wr[sb*210 : sb*210+210]
			d := f16le(blk[208:])
			for s := range 16 {
				sc[(sb*16+s)*step+r] = d * float32(int8(blk[192+s]))
			}
			for half := range 2 {
				ql, qh := blk[64*half:64*half+64], blk[128+32*half:128+32*half+32]
				for l := 0; l < 32; l += 8 {
					lo, hi, h := get64(ql[l:]), get64(ql[32+l:]), get64(qh[l:])
					img.put8(r, sb*256+128*half+l, biased(lo&lowNibbles|(h&two)<<4, 6))
					img.put8(r, sb*256+128*half+32+l, biased(hi&lowNibbles|(h>>2&two)<<4, 6))
					img.put8(r, sb*256+128*half+64+l, biased(lo>>4&lowNibbles|(h>>4&two)<<4, 6))
					img.put8(r, sb*256+128*half+96+l, biased(hi>>4&lowNibbles|(h>>6&two)<<4, 6))
				}
			}
		}
	}
}
