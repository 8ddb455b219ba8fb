package cpu

import (
	"sync"
)

// Q4_1 weights regrouped for decode (issue 26). A one-row kernel reads
// eight weight rows a block at a time; in the GGUF layout those eight
// blocks sit a row apart, so each block's eight [d m] words are gathered
// from eight places (eleven of the kernel's thirty vector µops a block)
// and the block's 160 bytes come from eight streams. In the grouped
// layout they are one: rows [0, 8·⌊rows/8⌋) go in groups of eight, group
// g at byte 8·g·wrb as before, and its block b at 160·b from there holds
// the eight rows' [d m] words (row k at 4k) then their 16 nibble bytes
// (row k at 32 + 16k). The rows past the last group stay as they were.
// The same bytes, so the weight reads no more memory; the kernels that
// read it do the same arithmetic, so every result keeps its bits.
const (
	q41Block   = 20 // a Q4_1 block: f16 d, f16 m, 16 nibble bytes
	q41Group8B = 8 * q41Block
)

// packQ41 is the grouped copy of a canonical Q4_1 matrix of rows rows of
// nb blocks.
func packQ41(src []byte, rows, nb int) []byte {
	dst := make([]byte, len(src))
	wrb := nb * q41Block
	g8 := rows / 8 * 8
	for g := 0; g < g8; g += 8 {
		base := g * wrb
		for b := range nb {
			o := dst[base+b*q41Group8B:]
			for k := range 8 {
				blk := src[base+k*wrb+b*q41Block:]
				copy(o[4*k:4*k+4], blk[:4])
				copy(o[32+16*k:48+16*k], blk[4:q41Block])
			}
		}
	}
	copy(dst[g8*wrb:], src[g8*wrb:])
	return dst
}

// q41Row writes row r of a grouped matrix of rows rows of nb blocks into
// dst (wrb bytes) in the canonical layout.
func q41Row(dst, w []byte, rows, nb, r int) {
	wrb := nb * q41Block
	if r >= rows/8*8 {
		copy(dst[:wrb], w[r*wrb:])
		return
	}
	base, k := r/8*8*wrb, r%8
	for b := range nb {
		o := w[base+b*q41Group8B:]
		blk := dst[b*q41Block:]
		copy(blk[:4], o[4*k:4*k+4])
		copy(blk[4:q41Block], o[32+16*k:48+16*k])
	}
}

// canonicalRows returns rows [o0, o1) (wrb bytes each) of t in the
// canonical layout: t's own bytes unless it is grouped, else buf (grown)
// holding a copy.
func (t *tensor) canonicalRows(buf *[]byte, o0, o1, wrb int) []byte {
	if !t.q41x8 {
		return t.raw[o0*wrb : o1*wrb]
	}
	*buf = growBytes(*buf, (o1-o0)*wrb)
	b := *buf
	rows, nb := t.rows(), wrb/q41Block
	for r := o0; r < o1; r++ {
		q41Row(b[(r-o0)*wrb:], t.raw, rows, nb, r)
	}
	return b[:(o1-o0)*wrb]
}

// q41Canon is scratch for a range of a grouped matrix that splits a group
// (matScratch.runRows), regrouped into the file's layout.
var q41Canon = sync.Pool{New: func() any { return new([]byte) }}

// q41GroupsThen runs grouped over a grouped matrix's whole groups and
// file over the rows after them, which keep the file's layout.
func q41GroupsThen(grouped, file rowsMDot) rowsMDot {
	return func(dst []float32, dstride int, w []byte, wstride, rows int, x []byte, xstride int, sc []float32, nb int) {
		g8 := rows / 8 * 8
		if g8 > 0 {
			grouped(dst, dstride, w, wstride, g8, x, xstride, sc, nb)
		}
		if rows > g8 {
			file(dst[g8:], dstride, w[g8*wstride:], wstride, rows-g8, x, xstride, sc, nb)
		}
	}
}

// q41x8Kernels is the Q4_1 kernel set for grouped matrices, nil where
// they do not run (then Upload keeps the canonical layout). It has the
// canonical set's kernels, so matScratch.group picks the same activation
// groups, and their results bit for bit.
var q41x8Kernels *quantKernel
