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
// from as many places, and a zmm of products holds two rows' partial sums,
// each converted and scaled per block (four µops for every VPDPBUSD).
// Grouped, sixteen rows' block b is one record: the sixteen f16 d (row k
// at 2k), for Q4_1 the sixteen f16 m (at 32+2k), then 64-byte quant
// vectors, vector j holding bytes 4j..4j+3 of every row's quants (row k
// at 4k): four of nibbles for Q4_1 (320 bytes a record), eight of bytes
// for Q8_0, stored as q+128 so they are VPDPBUSD's unsigned operand (544
// bytes). A lane is then a row: eight VPDPBUSD with the activation's
// dwords broadcast leave each lane the block's whole Σ q·a, exact in
// int32, converted and scaled once for sixteen rows (dotx16_amd64.s).
// Group g starts at byte 16·g·wrb, block b at b·16·(block bytes) from
// there; a matrix whose rows are not a multiple of sixteen gets zero rows
// (d = m = 0) to fill its last group, which compute 0 and are never read.
// The prompt-row (tiled) kernels and GetRows read rows put back in the
// file's layout (canonicalRows, x16Row).

// x16Dot is a grouped kernel for a fixed number A of activation rows:
// groups sixteen-row groups from w, the activations from x (xstride bytes
// apart) with their scale table sc (per block 2·A words: x16Scales),
// results to dst (dstride bytes apart), sixteen a group.
type x16Dot func(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

// x16Kernels are a weight type's grouped kernels by activation rows (1,
// 2, 3, 4 and 8, matScratch.group's sizes); [1] is nil where they do not
// run, and then Upload keeps the file's layout.
var x16Kernels = map[kernels.DType]*[9]x16Dot{kernels.Q4_1: {}, kernels.Q8_0: {}}

// x16Runs reports whether dt's matrices are grouped on this CPU.
func x16Runs(dt kernels.DType) bool {
	k := x16Kernels[dt]
	return k != nil && k[1] != nil
}

// packX16 is the grouped copy of a canonical Q4_1 or Q8_0 matrix of rows
// rows of nb blocks, padded to whole groups.
func packX16(dt kernels.DType, src []byte, rows, nb int) []byte {
	bb := dt.BlockBytes()
	wrb := nb * bb
	groups := (rows + 15) / 16
	dst := make([]byte, groups*16*wrb)
	zero := make([]byte, wrb) // the padding rows' blocks
	for g := range groups {
		base := g * 16 * wrb
		for k := range 16 {
			row := zero
			if 16*g+k < rows {
				row = src[(16*g+k)*wrb:]
			}
			for b := range nb {
				x16Block(dt, dst[base+b*16*bb:], row[b*bb:], k, true)
			}
		}
	}
	return dst
}

// x16Row writes row r of a grouped matrix of nb blocks a row into dst in
// the file's layout.
func x16Row(dt kernels.DType, dst, w []byte, nb, r int) {
	bb := dt.BlockBytes()
	base := r / 16 * 16 * nb * bb
	for b := range nb {
		x16Block(dt, w[base+b*16*bb:], dst[b*bb:], r%16, false)
	}
}

// x16Block copies row k's block between a group's record rec and the
// file's block blk: into the record when pack is set, else out of it.
func x16Block(dt kernels.DType, rec, blk []byte, k int, pack bool) {
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
		move(rec[32+2*k:32+2*k+2], blk[2:4])
		for j := range 4 {
			move(rec[64+64*j+4*k:64+64*j+4*k+4], blk[4+4*j:8+4*j])
		}
	case kernels.Q8_0:
		for j := range 8 {
			r, b := rec[32+64*j+4*k:32+64*j+4*k+4], blk[2+4*j:6+4*j]
			for i := range 4 {
				if pack {
					r[i] = b[i] ^ 0x80
				} else {
					b[i] = r[i] ^ 0x80
				}
			}
		}
	default:
		panic("x16Block: " + dt.String())
	}
}

// canonicalRows returns rows [o0, o1) (wrb bytes each) of t in the file's
// layout: t's own bytes unless it is grouped, else buf (grown) holding a
// copy.
func (t *tensor) canonicalRows(buf *[]byte, o0, o1, wrb int) []byte {
	if !t.x16 {
		return t.raw[o0*wrb : o1*wrb]
	}
	*buf = growBytes(*buf, (o1-o0)*wrb)
	b := *buf
	for r := o0; r < o1; r++ {
		x16Row(t.dtype, b[(r-o0)*wrb:], t.raw, wrb/t.dtype.BlockBytes(), r)
	}
	return b[:(o1-o0)*wrb]
}

// x16Scales is the grouped kernels' scale table for m activation rows of
// nb blocks (xstride bytes apart, bb bytes a block): per block each row's
// dx, then for a Q8_1 row its s (as actScales), for a Q8_0 row 128·Σ of
// its quants as an int32, the bias the Q8_0 kernels' unsigned quants add.
func x16Scales(sc []float32, x []byte, xstride, bb, nb, m int) {
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

// runX16 is runRows for a grouped matrix: rows [lo, hi) of wt for every
// activation row, each activation group (matScratch.group, whose scale
// tables scales made) through the kernel of its size. A one-row step's
// range goes to one call; a batch's goes a group at a time, each group's
// 5-26 KiB staying in L1 across the activation groups. A padded
// activation group (more rows than are left) writes to s.pad, as runRows'
// kernels do, copied out once for the whole range. Rows of a weight group
// outside [lo, hi) (a range matMulShared starts or ends inside a group)
// are computed into a scratch on the stack and dropped.
func (s *matScratch) runX16(dst []float32, wt *tensor, out, padCol, lo, hi, nb, xrb int) {
	ks := x16Kernels[wt.dtype]
	gb := 16 * nb * wt.dtype.BlockBytes()
	ps := s.padStride
	for i0 := 0; i0 < s.n; i0 += xTile {
		i1 := min(s.n, i0+xTile)
		padded := -1 // the padded activation group's first row
		for g0 := lo / 16; 16*g0 < hi; {
			g1 := g0 + 1
			if s.n == 1 && 16*g0 >= lo {
				g1 = max(g1, hi/16) // the whole groups inside the range, at once
			}
			a, z := max(lo, 16*g0), min(hi, 16*g1)
			for i := i0; i < i1; {
				m := s.group(i, i1)
				k, sc, x := ks[m], &s.sc[i*2*nb], &s.xq[i*xrb]
				switch {
				case a == 16*g0 && z == 16*g1 && m <= i1-i:
					k(&wt.raw[g0*gb], nb, x, xrb, sc, &dst[i*out+a], 4*out, g1-g0)
				case a == 16*g0 && z == 16*g1:
					k(&wt.raw[g0*gb], nb, x, xrb, sc, &s.pad[padCol+a], 4*ps, g1-g0)
					padded = i
				default:
					var part [8 * 16]float32 // g1 = g0+1 here
					k(&wt.raw[g0*gb], nb, x, xrb, sc, &part[0], 16*int(unsafe.Sizeof(part[0])), 1)
					for j := range min(m, i1-i) {
						copy(dst[(i+j)*out+a:(i+j)*out+z], part[16*j+a-16*g0:16*j+z-16*g0])
					}
				}
				i += m
			}
			g0 = g1
		}
		if padded >= 0 { // the whole groups' rows: [lo, hi) rounded inwards
			a, z := (lo+15)/16*16, hi/16*16
			for j := range i1 - padded {
				copy(dst[(padded+j)*out+a:(padded+j)*out+z], s.pad[j*ps+padCol+a:j*ps+padCol+z])
			}
		}
	}
}
