package cpu

// Attention reads a sequence's K and V a block at a time: a block's slots are
// consecutive rows of the cache (slot = block·bs + p%bs), so each run of
// positions inside one block is one call of the run kernels (scoresRun,
// valuesRun) instead of a dotHalfF32 and an axpyHalf call per position. The
// kernels give the per-position calls' bits, so the outputs are the same.

// attnScores sets scores[i] to q·K[first+i]·scale for the positions
// first.. of the sequence with block table blocks, each K row at
// slot·kvCols + off.
func attnScores(scores []float32, kc []uint16, blocks []int32, first, bs, kvCols, off int, q []float32, scale float32) {
	hd := len(q)
	for i := 0; i < len(scores); {
		p := first + i
		cnt := min(bs-p%bs, len(scores)-i)
		slot := int(blocks[p/bs])*bs + p%bs
		at := slot*kvCols + off
		scoresRun(scores[i:i+cnt], kc[at:at+(cnt-1)*kvCols+hd], kvCols, q, scale)
		i += cnt
	}
}

// attnValues adds (e[i]·inv)·V[first+i] to o for each position in order,
// V's rows laid out as attnScores' K rows.
func attnValues(o []float32, vc []uint16, blocks []int32, first, bs, kvCols, off int, e []float32, inv float32) {
	hd := len(o)
	for i := 0; i < len(e); {
		p := first + i
		cnt := min(bs-p%bs, len(e)-i)
		slot := int(blocks[p/bs])*bs + p%bs
		at := slot*kvCols + off
		valuesRun(o, vc[at:at+(cnt-1)*kvCols+hd], kvCols, e[i:i+cnt], inv)
		i += cnt
	}
}

// scoresRunGeneric sets dst[i] = q·k[i·stride:]·scale: the per-position
// calls the run kernels must match bit for bit.
func scoresRunGeneric(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	hd := len(q)
	for i := range dst {
		dst[i] = dotHalfF32(k[i*stride:i*stride+hd], q) * scale
	}
}

// valuesRunGeneric adds (e[i]·inv)·v[i·stride:] to o in order of i.
func valuesRunGeneric(o []float32, v []uint16, stride int, e []float32, inv float32) {
	hd := len(o)
	for i, w := range e {
		axpyHalf(o, w*inv, v[i*stride:i*stride+hd])
	}
}
