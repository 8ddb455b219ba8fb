package cpu

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Grouped expert products: MoEFFN's quantized path. Each expert's rows are
// multiplied by its weights together, in two passes over all experts, each
// one parallelFor (not three matMuls per expert):
//
//	x [n, hidden] ── quantized once ──▶ xq [n] rows
//	  gathered by expert ──▶ slots: expert e's m rows at [first[e], first[e]+m)
//	  pass 1: g, u [slot, ffn] = slot · gate_eᵀ, slot · up_eᵀ   units: expert × matrix × tile
//	  h = silu(g) ⊙ u, quantized per row
//	  pass 2: o [slot, hidden] = h · down_eᵀ                     units: expert × tile
//	  dst[r] += weight · o[r's slot], experts in ascending order
//
// A unit runs one tile of moeTile weight rows (more for experts of one to
// three rows: moeTileRows) against all of the expert's
// rows, in groups of 8, 4, 2 and 1 (rows8, rows4, rows2, rows), so the tile
// is read from memory once and from L1 after that. Every kernel gives each
// product the one-row kernel's bits, so a row's result does not depend on
// which rows share its expert (TestMoEBatchMatchesSolo). Q8_0 experts on
// AVX-512 VNNI take moe_amd64.s's kernels for 1 to 8 rows, which want
// their activations offset by 128 (moeOffset); elsewhere, where the 4- and
// 8-row kernels are much faster than the 1- and 2-row ones (moePads), a
// last group of 3 or 7 rows is padded to 4 or 8 with copies of the last row
// in the slots past m, whose results are never read.
type moeGroups struct {
	first  []int  // [experts] expert e's first slot
	count  []int  // [experts] its rows
	active []int  // experts with rows, ascending
	xq     []byte // [n][rb] the call's x rows in gate's partner format
	in     [3]moeActs
	g, u   []float32 // [slots, ffn]; g becomes h
	o      []float32 // [slots, hidden]

	// The pass being run, read by run.
	mats  [2]*tensor
	acts  [2]*moeActs
	outs  [2][]float32
	wrb   [2]int // bytes of a weight row of each matrix
	tile  int    // weight rows a unit takes
	tiles int    // tiles per matrix
	fn    func(lo, hi int)
}

// moeActs are one pass's activation slots in one partner format.
type moeActs struct {
	k      *quantKernel
	u      *[9]rowsMDot // kernels for 1–8 offset rows (moeOffsetRows), or nil
	pad    bool
	rb, nb int       // bytes and blocks of one row
	q      []byte    // [slots][rb]
	sc     []float32 // rows4/rows8 scale tables, a group's at its first slot·2·nb
}

// moeTile: weight rows a unit takes; 16 rows of a 1024-wide Q8_0 matrix are
// 17 KB, so they stay in L1 while the expert's rows pass over them.
const moeTile = 16

// moeTileRows is the tile for experts of at most maxM rows: moeTile, or
// while a unit would make fewer than 4·moeTile row products (a decode
// step's one row an expert), twice that, so the per-unit cost (the unit's
// arithmetic and the kernel's call and setup) is spread over more rows. A
// row's result does not depend on its tile.
func moeTileRows(maxM int) int {
	t := moeTile
	for maxM*t < 4*moeTile {
		t *= 2
	}
	return t
}

// group returns the rows the next kernel call takes when left rows remain:
// the largest group the kernel has, or a padded 4 or 8.
func (a *moeActs) group(left int) int {
	if a.u != nil {
		return min(left, 8)
	}
	switch k := a.k; {
	case k.rows8 != nil && (left >= 8 || a.pad && left == 7):
		return 8
	case k.rows4 != nil && (left >= 4 || a.pad && left == 3):
		return 4
	case k.rows2 != nil && left >= 2:
		return 2
	}
	return 1
}

// slots is the number of slots m rows take in a's groups (m and the pads).
func (a *moeActs) slots(m int) int {
	s := 0
	for s < m {
		s += a.group(m - s)
	}
	return s
}

func (a *moeActs) init(k *quantKernel, dt kernels.DType, cols, slots int) {
	a.k, a.u, a.pad = k, moeOffsetRows(dt), moePads(dt)
	a.nb = cols / dt.BlockElems()
	a.rb = a.nb * k.actBlockBytes
	a.q = growBytes(a.q, slots*a.rb)
	a.sc = grow(a.sc, slots*2*a.nb)
}

// fill pads expert e's slots past its m rows with copies of the last row
// and converts the scales of the groups whose kernels take tables.
func (a *moeActs) fill(first, m int) {
	end := first + a.slots(m)
	last := a.q[(first+m-1)*a.rb : (first+m)*a.rb]
	for s := first + m; s < end; s++ {
		copy(a.q[s*a.rb:(s+1)*a.rb], last)
	}
	if a.k.actBlockBytes == quant.Q8_KBlockBytes {
		return // the K-quant kernels read Q8_K's f32 scales themselves
	}
	for i := 0; i < m; {
		size := a.group(m - i)
		if size >= 4 || a.u != nil {
			s := first + i
			actScales(a.sc[2*a.nb*s:], a.q[s*a.rb:], a.rb, a.k.actBlockBytes, a.nb, size)
		}
		i += size
	}
}

// moeKernels returns the quantized kernels of the three expert weights, or
// ok false where one has none (float experts take the matMul path).
func moeKernels(gt, ut, wd *tensor) (kg, ku, kd *quantKernel, ok bool) {
	kg, ku, kd = quantKernels[gt.dtype], quantKernels[ut.dtype], quantKernels[wd.dtype]
	return kg, ku, kd, kg != nil && ku != nil && kd != nil
}

// moeBiases are per-expert biases of the three products (gpt-oss's
// experts): gate and up [experts, ffn], down [experts, hidden]. Each is
// added to its product before anything else reads it, the same float32
// addition matMul's bias makes, so the grouped path gives the per-expert
// matMuls' bits.
type moeBiases struct{ gate, up, down []float32 }

// grouped computes MoEFFN's mixture for the routed rows in s into d; with
// ut nil, gt is gate and up fused (moeFFN), one matrix in pass 1 whose
// output rows hold g then u. bias, where set, is added to each product.
func (b *Backend) moeGrouped(d, xs []float32, n int, gt, ut, wd *tensor, kg, ku, kd *quantKernel, act func(h, g, u []float32), bias *moeBiases) {
	s, g := &b.moe, &b.moe.grp
	experts, ffn, hidden := gt.shape[0], wd.shape[2], gt.shape[2]
	fused := ut == nil
	if fused {
		ut = gt
	}
	g.first, g.count = growInts(g.first, experts), growInts(g.count, experts)
	g.active = g.active[:0]
	gate, up, down := &g.in[0], &g.in[1], &g.in[2]
	// The kernels first: the slots an expert takes depend on their groups.
	gate.k, gate.u, gate.pad = kg, moeOffsetRows(gt.dtype), moePads(gt.dtype)
	up.k, up.u, up.pad = ku, moeOffsetRows(ut.dtype), moePads(ut.dtype)
	down.k, down.u, down.pad = kd, moeOffsetRows(wd.dtype), moePads(wd.dtype)
	slots := 0
	for e := range experts {
		m := len(s.rows[e])
		g.first[e], g.count[e] = slots, m
		if m > 0 {
			g.active = append(g.active, e)
			slots += max(gate.slots(m), up.slots(m), down.slots(m))
		}
	}
	// Pass 1's activations: each x row quantized once and copied into the
	// slots of its experts; up shares gate's where it groups them alike.
	gate.init(kg, gt.dtype, hidden, slots)
	g.gather(gate, s.rows, xs, n, hidden)
	down.init(kd, wd.dtype, ffn, slots)
	g.o = grow(g.o, slots*hidden)
	if fused {
		g.g = grow(g.g, slots*2*ffn)
		g.mats, g.acts, g.outs = [2]*tensor{gt}, [2]*moeActs{gate}, [2][]float32{g.g}
		g.runPass(&b.workers, 1, 2*ffn)
	} else {
		upActs := gate
		if ku != kg || up.pad != gate.pad || up.u != gate.u {
			up.init(ku, ut.dtype, hidden, slots)
			g.gather(up, s.rows, xs, n, hidden)
			upActs = up
		}
		g.g, g.u = grow(g.g, slots*ffn), grow(g.u, slots*ffn)
		g.mats, g.acts, g.outs = [2]*tensor{gt, ut}, [2]*moeActs{gate, upActs}, [2][]float32{g.g, g.u}
		g.runPass(&b.workers, 2, ffn)
	}

	// Pass 2's activations: h = act(g) ⊙ u of the real rows, quantized.
	for _, e := range g.active {
		f, m := g.first[e], g.count[e]
		for s := f; s < f+m; s++ {
			// Row by row, so a row's SIMD tail is the same whoever shares its expert.
			var h, u []float32
			if fused {
				h, u = g.g[s*2*ffn:s*2*ffn+ffn], g.g[s*2*ffn+ffn:(s+1)*2*ffn]
			} else {
				h, u = g.g[s*ffn:(s+1)*ffn], g.u[s*ffn:(s+1)*ffn]
			}
			if bias != nil {
				addTo(h, bias.gate[e*ffn:(e+1)*ffn])
				addTo(u, bias.up[e*ffn:(e+1)*ffn])
			}
			act(h, h, u)
			kd.quantize(down.q[s*down.rb:(s+1)*down.rb], h)
			if down.u != nil {
				moeOffset(down.q[s*down.rb : (s+1)*down.rb])
			}
		}
		down.fill(f, m)
	}
	g.mats, g.acts, g.outs = [2]*tensor{wd}, [2]*moeActs{down}, [2][]float32{g.o}
	g.runPass(&b.workers, 1, hidden)

	clear(d[:n*hidden])
	for _, e := range g.active {
		f := g.first[e]
		for i, r := range s.rows[e] {
			o := g.o[(f+i)*hidden : (f+i+1)*hidden]
			if bias != nil {
				addTo(o, bias.down[e*hidden:(e+1)*hidden])
			}
			axpy(d[int(r)*hidden:(int(r)+1)*hidden], s.weights[e][i], o)
		}
	}
	g.mats, g.outs = [2]*tensor{}, [2][]float32{} // do not pin the caller's weights
}

// gather quantizes x's n rows once into g.xq and copies each into the slots
// of the experts it was routed to.
func (g *moeGroups) gather(a *moeActs, rows [][]int32, xs []float32, n, hidden int) {
	g.xq = growBytes(g.xq, n*a.rb)
	for r := range n {
		a.k.quantize(g.xq[r*a.rb:(r+1)*a.rb], xs[r*hidden:(r+1)*hidden])
	}
	if a.u != nil {
		moeOffset(g.xq[:n*a.rb])
	}
	for _, e := range g.active {
		f := g.first[e]
		for i, r := range rows[e] {
			copy(a.q[(f+i)*a.rb:(f+i+1)*a.rb], g.xq[int(r)*a.rb:(int(r)+1)*a.rb])
		}
		a.fill(f, g.count[e])
	}
}

// runPass runs the current pass's units: per active expert, each of its
// matrices' tiles of out rows.
func (g *moeGroups) runPass(w *workers, mats, out int) {
	if g.fn == nil {
		g.fn = g.run
	}
	maxM := 1
	for _, e := range g.active {
		maxM = max(maxM, g.count[e])
	}
	g.tile = moeTileRows(maxM)
	g.tiles = (out + g.tile - 1) / g.tile
	for j, w := range g.mats[:mats] {
		g.wrb[j] = w.dtype.RowBytes(w.shape[2])
	}
	w.parallelFor(len(g.active)*mats*g.tiles, 1, g.fn)
}

func (g *moeGroups) run(lo, hi int) {
	per := g.tiles
	if g.mats[1] != nil {
		per *= 2
	}
	for u := lo; u < hi; u++ {
		j := u % per / g.tiles
		g.unit(g.active[u/per], g.mats[j], g.wrb[j], g.acts[j], g.outs[j], u%g.tiles)
	}
}

// unit multiplies tile t of expert e's matrix of w by the expert's rows.
func (g *moeGroups) unit(e int, w *tensor, wrb int, a *moeActs, dst []float32, t int) {
	out := w.shape[1]
	o0, o1 := t*g.tile, min(out, (t+1)*g.tile)
	ws := w.raw[(e*out+o0)*wrb : (e*out+o1)*wrb]
	k, q, rb, nb := a.k, a.q, a.rb, a.nb
	f, m := g.first[e], g.count[e]
	for i := 0; i < m; {
		size, s := a.group(m-i), f+i
		if a.u != nil {
			a.u[size](dst[s*out+o0:], out, ws, wrb, o1-o0, q[s*rb:], rb, a.sc[s*2*nb:(s+size)*2*nb], nb)
			i += size
			continue
		}
		switch size {
		case 8:
			k.rows8(dst[s*out+o0:], out, ws, wrb, o1-o0, q[s*rb:], rb, a.sc[s*2*nb:(s+8)*2*nb], nb)
		case 4:
			k.rows4(dst[s*out+o0:], out, ws, wrb, o1-o0, q[s*rb:], rb, a.sc[s*2*nb:(s+4)*2*nb], nb)
		case 2:
			k.rows2(dst[s*out+o0:s*out+o1], dst[(s+1)*out+o0:(s+1)*out+o1], ws, wrb,
				q[s*rb:(s+1)*rb], q[(s+1)*rb:(s+2)*rb], nb)
		default:
			k.rows(dst[s*out+o0:s*out+o1], ws, wrb, q[s*rb:(s+1)*rb], nb)
		}
		i += size
	}
}

// addTo adds b to a element by element.
func addTo(a, b []float32) {
	b = b[:len(a)]
	for i := range a {
		a[i] += b[i]
	}
}

func growBytes(s []byte, n int) []byte {
	if cap(s) < n {
		return make([]byte, n)
	}
	return s[:n]
}
