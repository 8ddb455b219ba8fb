package cpu

import (
	"math"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Q4_1 and Q8_0 weights regrouped for the generated-token kernels (issue
// 26).
//
// In the GGUF layout a row's blocks are consecutive, so a kernel that
// takes a block of several rows at once gathers their scales and quants
// from as many places, and a vector of products holds two rows' partial
// sums, each converted and scaled per block (four µops for every
// VPDPBUSD). Grouped, G rows' block b is one record (G = 16 on AVX-512
// VNNI, a zmm of rows; 8 on AVX2, a ymm): the G f16 d (row k at 2k), for
// Q4_1 the G f16 m (at 2G+2k), then quant vectors of 4G bytes, vector j
// holding bytes 4j..4j+3 of every row's quants (row k at 4k): four of
// nibbles for Q4_1 (20·G bytes a record), eight of bytes for Q8_0 (34·G).
// AVX-512 stores Q8_0 quants as q+128, VPDPBUSD's unsigned operand; AVX2
// keeps them signed for VPSIGNB. A lane is then a row: the activation's
// dwords broadcast against the vectors leave each lane the block's whole
// Σ q·a, exact in int32, converted and scaled once for G rows
// (dotx16_amd64.s, dotx8_amd64.s, which give the same bits). Group g
// starts at byte G·g·wrb, block b at b·G·(block bytes) from there; a
// matrix whose rows are not a multiple of G gets zero rows (d = m = 0) to
// fill its last group, which compute 0 and are never read. The prompt-row
// (tiled) kernels and GetRows read rows put back in the file's layout
// (canonicalRows, groupedRow).

// groupedDot is a grouped kernel for a fixed number A of activation rows:
// groups G-row groups from w, the activations from x (xstride bytes
// apart) with their scale table sc (per block 2·A words: groupedScales),
// results to dst (dstride bytes apart), G a group.
type groupedDot func(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

// groupedLayout is one grouping and its kernels: G, the bias its Q8_0
// records store quants with, and a weight type's kernels by activation
// rows (1, 2, 3, 4 and 8, matScratch.group's sizes; set where the CPU runs
// them).
type groupedLayout struct {
	rows    int
	q80Bias byte
	kernels map[kernels.DType]*[9]groupedDot
}

// The AVX-512 VNNI layout, a zmm of rows, whose Q8_0 quants are stored as
// q+128, VPDPBUSD's unsigned operand; and the AVX2 one, a ymm, whose
// quants stay signed for VPSIGNB.
var (
	x16Layout = groupedLayout{rows: 16, q80Bias: 0x80}
	x8Layout  = groupedLayout{rows: 8}
)

// grouped is the layout Upload regroups Q4_1 and Q8_0 matrices into; nil
// where no grouped kernels run, and then Upload keeps the file's layout.
var grouped *groupedLayout

// groupedRuns reports whether dt's matrices are grouped on this CPU.
func groupedRuns(dt kernels.DType) bool {
	return grouped != nil && grouped.kernels[dt] != nil
}

// packGrouped is the copy, in layout l, of a canonical Q4_1 or Q8_0
// matrix of rows rows of nb blocks, padded to whole groups.
func packGrouped(dt kernels.DType, src []byte, rows, nb int, l *groupedLayout) []byte {
	return packGroupedInto(func(n int) []byte { return make([]byte, n) }, dt, src, rows, nb, l)
}

// packGroupedInto is packGrouped writing into memory from alloc.
func packGroupedInto(alloc func(int) []byte, dt kernels.DType, src []byte, rows, nb int, l *groupedLayout) []byte {
	g := l.rows
	bb := dt.BlockBytes()
	wrb := nb * bb
	groups := (rows + g - 1) / g
	dst := alloc(groups * g * wrb)
	zero := make([]byte, wrb) // the padding rows' blocks
	for gi := range groups {
		base := gi * g * wrb
		for k := range g {
			row := zero
			if g*gi+k < rows {
				row = src[(g*gi+k)*wrb:]
			}
			for b := range nb {
				groupedBlock(dt, dst[base+b*g*bb:], row[b*bb:], k, l, true)
			}
		}
	}
	return dst
}

// groupedRow writes row r of a matrix in layout l, nb blocks a row, into
// dst in the file's layout.
func groupedRow(dt kernels.DType, dst, w []byte, nb, r int, l *groupedLayout) {
	g := l.rows
	bb := dt.BlockBytes()
	base := r / g * g * nb * bb
	for b := range nb {
		groupedBlock(dt, w[base+b*g*bb:], dst[b*bb:], r%g, l, false)
	}
}

// groupedBlock copies row k's block between a group's record rec in
// layout l and the file's block blk: into the record when pack is set,
// else out of it.
func groupedBlock(dt kernels.DType, rec, blk []byte, k int, l *groupedLayout, pack bool) {
	g := l.rows
	move := func(r, b []byte) {
		if pack {
			copy(r, b)
		} else {
			copy(b, r)
		}
	}
	move(rec[2*k:2*k+2], blk[0:2])
	switch dt {
	case kernels.Q4_1:
		move(rec[2*g+2*k:2*g+2*k+2], blk[2:4])
		for j := range 4 {
			at := 4*g + 4*g*j + 4*k
			move(rec[at:at+4], blk[4+4*j:8+4*j])
		}
	case kernels.Q8_0:
		bias := l.q80Bias
		for j := range 8 {
			at := 2*g + 4*g*j + 4*k
			r, b := rec[at:at+4], blk[2+4*j:6+4*j]
			for i := range 4 {
				if pack {
					r[i] = b[i] ^ bias
				} else {
					b[i] = r[i] ^ bias
				}
			}
		}
	default:
		panic("groupedBlock: " + dt.String())
	}
}

// canonicalRows returns rows [o0, o1) (wrb bytes each) of t in the file's
// layout: t's own bytes unless it is grouped, else buf (grown) holding a
// copy.
func (t *tensor) canonicalRows(buf *[]byte, o0, o1, wrb int) []byte {
	if t.layout == nil {
		return t.raw[o0*wrb : o1*wrb]
	}
	*buf = growBytes(*buf, (o1-o0)*wrb)
	b := *buf
	for r := o0; r < o1; r++ {
		groupedRow(t.dtype, b[(r-o0)*wrb:], t.raw, wrb/t.dtype.BlockBytes(), r, t.layout)
	}
	return b[:(o1-o0)*wrb]
}

// groupedScales is the grouped kernels' scale table for m activation rows of
// nb blocks (xstride bytes apart, bb bytes a block): per block each row's
// dx, then for a Q8_1 row its s (as actScales), for a Q8_0 row 128·Σ of
// its quants as an int32, the bias the AVX-512 Q8_0 kernels' unsigned
// quants add.
func groupedScales(sc []float32, x []byte, xstride, bb, nb, m int) {
	if bb != quant.Q8_0BlockBytes {
		actScales(sc, x, xstride, bb, nb, m)
		return
	}
	sc = sc[:nb*2*m]
	for j := range m {
		xj := x[j*xstride:]
		for b := range nb {
			blk := xj[b*bb : (b+1)*bb]
			sc[b*2*m+j] = quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
			var sum int32
			for _, q := range blk[2:] {
				sum += int32(int8(q))
			}
			sc[b*2*m+m+j] = math.Float32frombits(uint32(128 * sum))
		}
	}
}

// runGrouped is runRows for a grouped matrix: rows [lo, hi) of wt for
// every activation row, each activation group (matScratch.group, whose
// scale tables scales made) through the kernel of its size. A one-row
// step's range goes to one call; a batch's goes a weight group at a time,
// each group's 2-26 KiB staying in L1 across the activation groups. A
// padded activation group (more rows than are left) writes to s.pad, as
// runRows' kernels do, copied out once for the whole range. Rows of a
// weight group outside [lo, hi) (a range matMulShared starts or ends
// inside a group) are computed into a scratch on the stack and dropped.
func (s *matScratch) runGrouped(dst []float32, wt *tensor, out, padCol, lo, hi, nb, xrb int) {
	G := wt.layout.rows
	ks := wt.layout.kernels[wt.dtype]
	gb := G * nb * wt.dtype.BlockBytes()
	ps := s.padStride
	for i0 := 0; i0 < s.n; i0 += xTile {
		i1 := min(s.n, i0+xTile)
		padded := -1 // the padded activation group's first row
		for g0 := lo / G; G*g0 < hi; {
			g1 := g0 + 1
			if s.n == 1 && G*g0 >= lo {
				g1 = max(g1, hi/G) // the whole groups inside the range, at once
			}
			a, z := max(lo, G*g0), min(hi, G*g1)
			for i := i0; i < i1; {
				m := s.group(i, i1)
				k, sc, x := ks[m], &s.sc[i*2*nb], &s.xq[i*xrb]
				switch {
				case a == G*g0 && z == G*g1 && m <= i1-i:
					k(&wt.raw[g0*gb], nb, x, xrb, sc, &dst[i*out+a], 4*out, g1-g0)
				case a == G*g0 && z == G*g1:
					k(&wt.raw[g0*gb], nb, x, xrb, sc, &s.pad[padCol+a], 4*ps, g1-g0)
					padded = i
				default:
					var part [8 * 16]float32 // g1 = g0+1 here; G ≤ 16
					k(&wt.raw[g0*gb], nb, x, xrb, sc, &part[0], G*int(unsafe.Sizeof(part[0])), 1)
					for j := range min(m, i1-i) {
						copy(dst[(i+j)*out+a:(i+j)*out+z], part[G*j+a-G*g0:G*j+z-G*g0])
					}
				}
				i += m
			}
			g0 = g1
		}
		if padded >= 0 { // the whole groups' rows: [lo, hi) rounded inwards
			a, z := (lo+G-1)/G*G, hi/G*G
			for j := range i1 - padded {
				copy(dst[(padded+j)*out+a:(padded+j)*out+z], s.pad[j*ps+padCol+a:j*ps+padCol+z])
			}
		}
	}
}
