//go:build amd64 && !noasm

package cpu

//go:noescape
func attnScoresRunAVX2(dst *float32, k *uint16, n int, stride int, q *float32, hd int, scale float32)

//go:noescape
func attnValuesRunAVX2(o *float32, v *uint16, n int, stride int, e *float32, hd int, inv float32)

// scoresRun sets dst[i] = q·k[i·stride:]·scale, k holding len(dst) rows of
// len(q) halves stride apart: one assembly call where the head size is a
// multiple of 8, the per-position calls otherwise.
func scoresRun(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	n, hd := len(dst), len(q)
	if !useAVX2 || n == 0 || hd == 0 || hd%8 != 0 {
		scoresRunGeneric(dst, k, stride, q, scale)
		return
	}
	_ = k[(n-1)*stride+hd-1] // the assembly trusts the rows to lie in k
	attnScoresRunAVX2(&dst[0], &k[0], n, stride, &q[0], hd, scale)
}

// valuesRun adds (e[i]·inv)·v[i·stride:] to o in order of i, v laid out as
// scoresRun's k.
func valuesRun(o []float32, v []uint16, stride int, e []float32, inv float32) {
	n, hd := len(e), len(o)
	if !useAVX2 || n == 0 || hd == 0 || hd%8 != 0 {
		valuesRunGeneric(o, v, stride, e, inv)
		return
	}
	_ = v[(n-1)*stride+hd-1]
	attnValuesRunAVX2(&o[0], &v[0], n, stride, &e[0], hd, inv)
}
