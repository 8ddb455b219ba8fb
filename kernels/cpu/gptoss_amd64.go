//go:build amd64 && !noasm

package cpu

//go:noescape
func oaiSwiGLUPreAVX2(t, gate *float32, n int, alpha, limit float32)

//go:noescape
func oaiSwiGLUPostAVX2(gate, up, t *float32, n int, limit float32)

// oaiSwiGLUPre and oaiSwiGLUPost: gptoss_amd64.s for the multiple-of-8
// prefix, the generic loops for the tail.
func oaiSwiGLUPre(t, g []float32, alpha, limit float32) {
	m := len(g) &^ 7
	if useAVX2 && m > 0 {
		_ = t[m-1]
		oaiSwiGLUPreAVX2(&t[0], &g[0], m, alpha, limit)
		t, g = t[m:], g[m:]
	}
	oaiSwiGLUPreGeneric(t, g, alpha, limit)
}

func oaiSwiGLUPost(g, u, t []float32, limit float32) {
	m := len(g) &^ 7
	if useAVX2 && m > 0 {
		_, _ = u[m-1], t[m-1]
		oaiSwiGLUPostAVX2(&g[0], &u[0], &t[0], m, limit)
		g, u, t = g[m:], u[m:], t[m:]
	}
	oaiSwiGLUPostGeneric(g, u, t, limit)
}

//go:noescape
func sinkScoresAVX2(dst *float32, k *uint16, slots *int32, n int, stride int, q *float32, hd int, scale float32)

//go:noescape
func sinkValuesAVX2(o *float32, v *uint16, slots *int32, e *float32, n int, stride int, hd int, inv float32)

// sinkScores and sinkValues: one assembly call for all of a head's
// positions where the head size is a multiple of 8, with the per-position
// calls' bits (dotHalfF32, axpyHalf); the generic loops otherwise.
func sinkScores(scores []float32, kc []uint16, slots []int32, kvCols, off int, q []float32, scale float32) {
	hd := len(q)
	if !useAVX2 || hd == 0 || hd%8 != 0 || len(slots) == 0 {
		sinkScoresGeneric(scores, kc, slots, kvCols, off, q, scale)
		return
	}
	checkSlots(len(kc), slots, kvCols, off, hd)
	_ = scores[len(slots)-1]
	sinkScoresAVX2(&scores[0], &kc[off], &slots[0], len(slots), kvCols, &q[0], hd, scale)
}

func sinkValues(o []float32, vc []uint16, slots []int32, kvCols, off int, e []float32, inv float32) {
	hd := len(o)
	if !useAVX2 || hd == 0 || hd%8 != 0 || len(slots) == 0 {
		sinkValuesGeneric(o, vc, slots, kvCols, off, e, inv)
		return
	}
	checkSlots(len(vc), slots, kvCols, off, hd)
	_ = e[len(slots)-1]
	sinkValuesAVX2(&o[0], &vc[off], &slots[0], &e[0], len(slots), kvCols, hd, inv)
}

// checkSlots panics unless every slot's hd halves at off lie inside a cache
// of n halves: the assembly trusts them.
func checkSlots(n int, slots []int32, kvCols, off, hd int) {
	for _, s := range slots {
		if s < 0 || int(s)*kvCols+off+hd > n {
			panic("cpu backend: SinkAttention: slot outside the cache")
		}
	}
}
