package cpu

import "unsafe"

// Q4_1 weights regrouped for the generated-token kernels (issue 26).
//
// In the GGUF layout a row's blocks are consecutive, so a kernel that
// takes a block of several rows at once gathers their scales and nibbles
// from as many places, and a zmm of products holds two rows' partial sums
// that must each be converted and scaled per block (four µops for every
// VPDPBUSD). Grouped, sixteen rows' block b is one 320-byte record: the
// sixteen f16 d (row k at 2k), the sixteen f16 m (at 32+2k), then four
// 64-byte vectors, vector j holding bytes 4j..4j+3 of every row's sixteen
// nibble bytes (row k at 64+64j+4k). A lane is then a row: eight VPDPBUSD
// with the activation's dwords broadcast leave each lane the block's
// whole Σ q·a, exact in int32, converted and scaled once for sixteen rows
// (dotq41x16_amd64.s). Group g starts at byte 16·g·wrb, block b at 320·b
// from there; a matrix whose rows are not a multiple of sixteen gets zero
// rows (d = m = 0) to fill its last group, which compute 0 and are never
// read. The prompt-row (tiled) kernels and GetRows read rows regrouped
// back into the file's layout (canonicalRows, q41x16Row).
const (
	q41Block    = 20 // a Q4_1 block: f16 d, f16 m, 16 nibble bytes
	q41Group16B = 16 * q41Block
)

// packQ41x16 is the grouped copy of a canonical Q4_1 matrix of rows rows
// of nb blocks, padded to whole groups.
func packQ41x16(src []byte, rows, nb int) []byte {
	wrb := nb * q41Block
	groups := (rows + 15) / 16
	dst := make([]byte, groups*16*wrb)
	for g := range groups {
		base := g * 16 * wrb
		for k := range min(16, rows-16*g) {
			row := src[(16*g+k)*wrb:]
			for b := range nb {
				blk, o := row[b*q41Block:], dst[base+b*q41Group16B:]
				copy(o[2*k:2*k+2], blk[0:2])
				copy(o[32+2*k:32+2*k+2], blk[2:4])
				for j := range 4 {
					copy(o[64+64*j+4*k:64+64*j+4*k+4], blk[4+4*j:8+4*j])
				}
			}
		}
	}
	return dst
}

// q41x16Row writes row r of a grouped matrix of nb blocks a row into dst
// (wrb bytes) in the file's layout.
func q41x16Row(dst, w []byte, nb, r int) {
	wrb := nb * q41Block
	base, k := r/16*16*wrb, r%16
	for b := range nb {
		o, blk := w[base+b*q41Group16B:], dst[b*q41Block:]
		copy(blk[0:2], o[2*k:2*k+2])
		copy(blk[2:4], o[32+2*k:32+2*k+2])
		for j := range 4 {
			copy(blk[4+4*j:8+4*j], o[64+64*j+4*k:64+64*j+4*k+4])
		}
	}
}

// canonicalRows returns rows [o0, o1) (wrb bytes each) of t in the file's
// layout: t's own bytes unless it is grouped, else buf (grown) holding a
// copy.
func (t *tensor) canonicalRows(buf *[]byte, o0, o1, wrb int) []byte {
	if !t.q41x16 {
		return t.raw[o0*wrb : o1*wrb]
	}
	*buf = growBytes(*buf, (o1-o0)*wrb)
	b := *buf
	for r := o0; r < o1; r++ {
		q41x16Row(b[(r-o0)*wrb:], t.raw, wrb/q41Block, r)
	}
	return b[:(o1-o0)*wrb]
}

// x16Dot is a grouped kernel for a fixed number of activation rows: groups
// sixteen-row groups from w, the activations from x (xstride bytes apart)
// with their scale table sc (actScales), results to dst (dstride bytes
// apart), sixteen a group.
type x16Dot func(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

// q41x16Kernels are the grouped kernels by activation rows (1, 2, 3, 4 and
// 8, matScratch.group's sizes); empty where they do not run
// (q41x16Kernels[1] nil), and then Upload keeps the file's layout.
var q41x16Kernels [9]x16Dot

// runX16 is runRows for a grouped Q4_1 matrix: rows [lo, hi) of wt for
// every activation row, each activation group (matScratch.group, whose
// scale tables scales made) through the kernel of its size. A one-row
// step's range goes to one call; a batch's goes a group at a time, each
// group's 5-16 KiB staying in L1 across the activation groups. A padded
// activation group (more rows than are left) writes to s.pad, as runRows'
// kernels do, copied out once for the whole range. Rows of a weight group
// outside [lo, hi) (a range matMulShared starts or ends inside a group)
// are computed into a scratch on the stack and dropped.
func (s *matScratch) runX16(dst []float32, wt *tensor, out, padCol, lo, hi, nb, xrb int) {
	gb := 16 * nb * q41Block
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
				k, sc, x := q41x16Kernels[m], &s.sc[i*2*nb], &s.xq[i*xrb]
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
