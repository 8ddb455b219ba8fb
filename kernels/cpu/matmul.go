package cpu

import (
	"slices"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// matScratch is matMul's state, kept on the workers so a steady-state call
// allocates nothing: the quantized activations and the one closure handed to
// parallelFor (a fresh closure per call would escape to the heap).
type matScratch struct {
	xq []byte    // [n][nb] activation blocks in the partner format
	sc []float32 // xq's scales for the rowsMDot kernels, per group of rows (actScales)
	// allScales: sc holds every group's table, one- and two-row groups
	// included, as the grouped matrices' kernels take it (groupedScales; set by
	// the caller before prepare).
	allScales bool

	// The current call, read by run.
	dst, x, bias []float32
	n, in, out   int
	wt           *tensor
	k            *quantKernel
	padTo        padding   // k.pad, or never on the tiled path
	np           int       // n and the padding rows of its last group
	pad          []float32 // a padded group's results, padStride apart
	padStride    int       // the call's output columns: out, or the segments' sum
	fn           func(lo, hi int)

	// matMulShared's weights, one segment of the call's columns each; nil
	// for a call of one weight.
	segs []matSeg

	tiled bool    // this call takes the tiled (AMX) path
	plan  amxPlan // its activation tiles (amx.go)

	// matMulPrompt's gathered rows when a batch mixes prompt rows with
	// others.
	px, pdst, rx, rdst []float32
	packFn             func(lo, hi int) // pack, kept as one closure
}

// matSeg is one weight of a matMulShared call: columns [start, start+out)
// of the call are rows [0, out) of wt, written to dst (plus bias).
type matSeg struct {
	dst, bias  []float32
	wt         *tensor
	start, out int
}

// tiledRows reports whether a call on weights of type dt with these
// prompt flags takes the tiled kernels for some of its rows.
func tiledRows(dt kernels.DType, prompt []bool) bool {
	return tiledPrompt(dt) && slices.Contains(prompt, true)
}

// Tiling for n > 1: a tile of wTile weight rows (≤ 16·0.9 KB for in=1536)
// stays in L1 while each of up to xTile quantized activation rows (≤ 32·1.7
// KB) passes over it, so each weight is read from memory once per xTile rows;
// for decode-sized batches that is once per step. With n = 1 a thread's whole
// range of rows goes to the kernel in one call.
const (
	wTile = 16
	xTile = 32
)

// matMul computes dst[i*out+o] = Σ_k x[i*in+k]·W[o,k] (+ bias[o]) for i < n,
// where W is wt: out rows of in elements, quantized or float. Quantized
// weights are dotted against activations quantized once per call to the
// partner format, as llama.cpp does, so our logits track its logits.
// Shapes were checked by the caller (Backend.MatMul).
func matMul(w *workers, dst, x []float32, n, in int, wt *tensor, out int, bias []float32) {
	matMulWith(w, dst, x, n, in, wt, out, bias, false)
}

// matMulPrompt is matMul with the rows flagged in prompt (len n, or nil for
// none) computed by the tiled kernels where the CPU and the weight type
// have them (amx.go), the others by the row kernels.
//
// Why by row and not by batch size: the two kernels sum a block's products
// in different f32 orders, and with activations re-quantized at every layer
// a last-bit difference grows into a different token now and then. A row's
// kernel must therefore depend on the row alone, never on the rows beside
// it (design invariant 6: a prompt alone and inside a batch give the same
// greedy output): prompt rows always take the tiled path, even a lone one,
// and generated tokens the row kernels, whether decoded or recomputed.
func matMulPrompt(w *workers, dst, x []float32, n, in int, wt *tensor, out int, bias []float32, prompt []bool) {
	if !tiledPrompt(wt.dtype) || prompt == nil {
		matMul(w, dst, x, n, in, wt, out, bias)
		return
	}
	tiled := 0
	for _, p := range prompt[:n] {
		if p {
			tiled++
		}
	}
	switch tiled {
	case 0:
		matMul(w, dst, x, n, in, wt, out, bias)
		return
	case n:
		matMulWith(w, dst, x, n, in, wt, out, bias, true)
		return
	}
	// A step that prefills some sequences and decodes others: each kind of
	// row gathered, multiplied, and put back.
	s := &w.mm
	s.px, s.rx = grow(s.px, tiled*in), grow(s.rx, (n-tiled)*in)
	s.pdst, s.rdst = grow(s.pdst, tiled*out), grow(s.rdst, (n-tiled)*out)
	pi, ri := 0, 0
	for i, p := range prompt[:n] {
		if p {
			copy(s.px[pi*in:(pi+1)*in], x[i*in:(i+1)*in])
			pi++
		} else {
			copy(s.rx[ri*in:(ri+1)*in], x[i*in:(i+1)*in])
			ri++
		}
	}
	px, pdst, rx, rdst := s.px, s.pdst, s.rx, s.rdst
	matMulWith(w, pdst, px, tiled, in, wt, out, bias, true)
	matMulWith(w, rdst, rx, n-tiled, in, wt, out, bias, false)
	pi, ri = 0, 0
	for i, p := range prompt[:n] {
		if p {
			copy(dst[i*out:(i+1)*out], pdst[pi*out:(pi+1)*out])
			pi++
		} else {
			copy(dst[i*out:(i+1)*out], rdst[ri*out:(ri+1)*out])
			ri++
		}
	}
}

// matMulWith is matMul, on the tiled kernels when tiled is set (the caller
// checked the weight type has them).
func matMulWith(w *workers, dst, x []float32, n, in int, wt *tensor, out int, bias []float32, tiled bool) {
	s := &w.mm
	s.dst, s.bias, s.wt, s.out = dst, bias, wt, out
	s.allScales = wt.layout != nil && !tiled
	w.beginProduct(opWeights{wt}, tiled)
	s.prepare(w, x, n, in, wt.dtype, out, tiled)
	// Chunks of whole weight tiles, so a chunk edge never splits a tile.
	w.parallelFor(out, wTile, s.fn)
	s.dst, s.x, s.bias, s.wt = nil, nil, nil, nil // do not pin the caller's buffers
}

// matMulShared is matMul for several weights of one quantized type over
// the same activations (kernels.SharedInput): the activations quantized
// once, and the weights' rows shared out as one operation, whose chunks
// may span two weights. Each row takes the kernel and activation groups
// matMul would give it, so its result is matMul's bit for bit.
func matMulShared(w *workers, args []matArgs, n int) {
	s := &w.mm
	s.segs = s.segs[:0]
	total := 0
	var op opWeights
	for i, a := range args {
		s.segs = append(s.segs, matSeg{dst: a.dst, bias: a.bias, wt: a.wt, start: total, out: a.out})
		total += a.out
		if i < len(op) {
			op[i] = a.wt
		}
	}
	w.beginProduct(op, false)
	s.allScales = args[0].wt.layout != nil // every 2-D matrix of a type is, or none
	s.prepare(w, args[0].x, n, args[0].in, args[0].wt.dtype, total, false)
	w.parallelFor(total, wTile, s.fn)
	clear(s.segs) // do not pin the caller's buffers
	s.segs, s.x = s.segs[:0], nil
}

// prepare sets up a call of out output columns over n rows of x: the
// activations quantized (and packed, on the tiled path) for dt's kernels.
func (s *matScratch) prepare(w *workers, x []float32, n, in int, dt kernels.DType, out int, tiled bool) {
	if s.fn == nil {
		s.fn = s.run
	}
	s.x, s.n, s.in = x, n, in
	s.padStride = out
	s.k = quantKernels[dt]
	if s.k == nil {
		return
	}
	nb := in / dt.BlockElems()
	// A padded last group reads activation rows n..np−1: they are
	// allocated, cleared.
	s.padTo = padding{}
	if !tiled {
		s.padTo = s.k.pad
	}
	np := s.rowsPadded(n)
	s.np = np
	if np > n {
		s.pad = grow(s.pad, 8*out)
	}
	need := np * nb * s.k.actBlockBytes
	if cap(s.xq) < need {
		s.xq = make([]byte, need)
	}
	s.xq = s.xq[:need]
	rb := nb * s.k.actBlockBytes
	s.tiled = tiled
	if tiled {
		// Quantizing and packing a prompt chunk's rows is a tenth of its
		// work on one thread: the rows are shared out.
		if s.packFn == nil {
			s.packFn = s.pack
		}
		s.plan.size(amxFormats[dt], n, in, w.threads)
		w.parallelFor(n, 4, s.packFn)
		return
	}
	for i := range n {
		s.k.quantize(s.xq[i*rb:(i+1)*rb], x[i*in:(i+1)*in])
	}
	clear(s.xq[n*rb:])
	s.scales(n, nb, rb)
}

// pack quantizes activation rows [lo, hi) and packs them into the tiled
// path's B tiles.
func (s *matScratch) pack(lo, hi int) {
	rb := s.in / s.wt.dtype.BlockElems() * s.k.actBlockBytes
	for i := lo; i < hi; i++ {
		s.k.quantize(s.xq[i*rb:(i+1)*rb], s.x[i*s.in:(i+1)*s.in])
	}
	s.plan.pack(s.xq, rb, s.k.actBlockBytes, lo, hi)
}

// group is how many activation rows, from row i of an activation tile
// ending at row i1, run hands to one kernel: the widest of rows8, rows4,
// rows3 (a grouped matrix's kernels always have it), and rows2M or rows2
// that the weight type has and that fits, or 8
// or 4 for a last group that padTo pads (more than are left). A row's
// kernel thus depends on n alone, never on the rows' values, and every
// kernel gives the one-row kernel's bits (design invariant 6).
func (s *matScratch) group(i, i1 int) int {
	p := s.padTo
	switch left := i1 - i; {
	case s.k.rows8 != nil && (left >= 8 || p.to8 > 0 && left >= p.to8):
		return 8
	case s.k.rows4 != nil && (left >= 4 || p.to4 > 0 && left >= p.to4):
		return 4
	case (s.k.rows3 != nil || s.allScales) && left >= 3: // every grouped layout has a three-row kernel
		return 3
	case (s.k.rows2 != nil || s.k.rows2M != nil) && left >= 2:
		return 2
	}
	return 1
}

// rowsPadded is n and the padding rows of the last group.
func (s *matScratch) rowsPadded(n int) int {
	i := max(0, (n-1)/xTile*xTile)
	for i < n {
		i += s.group(i, n)
	}
	return i
}

// scales converts the activation scales for the groups that run hands to
// the rowsMDot kernels (rows8, rows4, rows3, rows2M), found as run finds them.
// Group rows [i, i+m) has its table at sc[2·nb·i:], 2·nb·m floats.
func (s *matScratch) scales(n, nb, rb int) {
	if s.k.rows4 == nil && s.k.rows8 == nil && s.k.rows3 == nil && s.k.rows2M == nil && !s.allScales {
		return
	}
	need := 2 * nb * s.np
	if cap(s.sc) < need {
		s.sc = make([]float32, need)
	}
	s.sc = s.sc[:need]
	if s.k.actBlockBytes == quant.Q8_KBlockBytes {
		return // the K-quant kernels read Q8_K's f32 scales themselves
	}
	for i0 := 0; i0 < n; i0 += xTile {
		i1 := min(n, i0+xTile)
		for i := i0; i < i1; {
			m := s.group(i, i1)
			if s.allScales {
				groupedScales(s.sc[2*nb*i:], s.xq[i*rb:], rb, s.k.actBlockBytes, nb, m)
			} else if m > 2 || m == 2 && s.k.rows2M != nil {
				actScales(s.sc[2*nb*i:], s.xq[i*rb:], rb, s.k.actBlockBytes, nb, m)
			}
			i += m
		}
	}
}

// run computes output columns [lo, hi) for every activation row.
func (s *matScratch) run(lo, hi int) {
	if len(s.segs) > 0 {
		for i := range s.segs {
			g := &s.segs[i]
			if a, z := max(lo, g.start), min(hi, g.start+g.out); a < z {
				s.runRows(g.dst, g.bias, g.wt, g.out, g.start, a-g.start, z-g.start)
			}
		}
		return
	}
	if s.k == nil {
		s.runFloat(lo, hi)
		return
	}
	if s.tiled {
		s.plan.run(s.dst[:s.n*s.out], s.out, s.wt, lo, hi)
		s.addBias(s.dst, s.bias, s.out, lo, hi)
		return
	}
	s.runRows(s.dst, s.bias, s.wt, s.out, 0, lo, hi)
}

// runRows computes rows [lo, hi) of wt (out rows, written to dst) for
// every activation row on the row kernels. padCol is where wt's rows
// start among the call's columns, where a padded group's results go.
func (s *matScratch) runRows(dst, bias []float32, wt *tensor, out, padCol, lo, hi int) {
	dt := wt.dtype
	nb := s.in / dt.BlockElems()
	wrb, xrb := dt.RowBytes(s.in), nb*s.k.actBlockBytes
	if wt.layout != nil {
		s.runGrouped(dst, wt, out, padCol, lo, hi, nb, xrb)
		s.addBias(dst, bias, out, lo, hi)
		return
	}
	raw, xq := wt.raw, s.xq
	tile := wTile
	if s.n == 1 {
		tile = hi - lo
	}
	for i0 := 0; i0 < s.n; i0 += xTile {
		i1 := min(s.n, i0+xTile)
		for o0 := lo; o0 < hi; o0 += tile {
			o1 := min(hi, o0+tile)
			ws, ks := raw[o0*wrb:o1*wrb], s.k
			for i := i0; i < i1; {
				m := s.group(i, i1)
				var k rowsMDot
				switch m {
				case 8:
					k = ks.rows8
				case 4:
					k = ks.rows4
				case 3:
					k = ks.rows3
				case 2:
					k = ks.rows2M
				}
				switch {
				case m > i1-i: // padded: the padding rows' results are dropped
					ps, pc := s.padStride, padCol+o0
					k(s.pad[pc:], ps, ws, wrb, o1-o0, xq[i*xrb:], xrb, s.sc[i*2*nb:(i+m)*2*nb], nb)
					for j := range i1 - i {
						copy(dst[(i+j)*out+o0:(i+j)*out+o1], s.pad[j*ps+pc:j*ps+pc+o1-o0])
					}
				case k != nil:
					k(dst[i*out+o0:], out, ws, wrb, o1-o0, xq[i*xrb:], xrb, s.sc[i*2*nb:(i+m)*2*nb], nb)
				case m == 2:
					ks.rows2(dst[i*out+o0:i*out+o1], dst[(i+1)*out+o0:(i+1)*out+o1], ws, wrb,
						xq[i*xrb:(i+1)*xrb], xq[(i+1)*xrb:(i+2)*xrb], nb)
				default:
					ks.rows(dst[i*out+o0:i*out+o1], ws, wrb, xq[i*xrb:(i+1)*xrb], nb)
				}
				i += m
			}
		}
	}
	s.addBias(dst, bias, out, lo, hi)
}

func (s *matScratch) addBias(dst, bias []float32, out, lo, hi int) {
	if bias == nil {
		return
	}
	for i := range s.n {
		for o := lo; o < hi; o++ {
			dst[i*out+o] += bias[o]
		}
	}
}

// runFloat handles F32, F16 and BF16 weights: dotted in f32 against the
// unquantized activations, F16/BF16 widened as they are loaded.
func (s *matScratch) runFloat(lo, hi int) {
	dt, in, out := s.wt.dtype, s.in, s.out
	esz := dt.BlockBytes()
	for i0 := 0; i0 < s.n; i0 += xTile {
		i1 := min(s.n, i0+xTile)
		for o := lo; o < hi; o++ {
			for i := i0; i < i1; i++ {
				xi := s.x[i*in : (i+1)*in]
				var v float32
				if s.wt.f32 != nil {
					v = dotF32(s.wt.f32[o*in:(o+1)*in], xi)
				} else {
					v = dotHalf(dt, s.wt.raw[o*in*esz:(o+1)*in*esz], xi)
				}
				if s.bias != nil {
					v += s.bias[o]
				}
				s.dst[i*out+o] = v
			}
		}
	}
}
