package cpu

import "math"

// The chunked form of the Gated DeltaNet recurrence (the WY form of
// Yang et al., "Gated Delta Networks", and llama.cpp's
// build_delta_net_chunking), for one value head of one sequence's rows.
// Within a chunk of C rows starting from state S0, with Γ_t the product of
// the decays up to row t:
//
//	δ_t = β_t(v_t − Γ_t·S0ᵀk_t − Σ_{s<t} Γ_t/Γ_s·(k_s·k_t)·δ_s)     (forward substitution)
//	o_t = (Γ_t·S0ᵀq_t + Σ_{s≤t} Γ_t/Γ_s·(k_s·q_t)·δ_s)/√S
//	S_C = Γ_C·S0 + Σ_s Γ_C/Γ_s·k_s·δ_sᵀ
//
// Its arithmetic is matrix-shaped (C×S by S×S, C×C by C×S), which a GPU
// runs on its tensor cores; on the CPU it does no fewer operations than
// the recurrence (BenchmarkDeltaNetForms), and its rounding depends on
// where chunks start, so a row's result would depend on how its prompt was
// split into steps. The CPU backend's DeltaNet therefore runs the
// recurrent form, and this one is checked against it (TestDeltaChunkMatchesRecurrence).

// deltaChunkScratch is one chunk's working memory for a head of size s.
type deltaChunkScratch struct {
	gam         []float64 // [C] cumulative log-decay
	delta, kTS0 []float32 // [C][S]: δ_t; S0ᵀk_t then S0ᵀq_t
	qs0         []float32 // [C][S]
}

func newDeltaChunkScratch(c, s int) *deltaChunkScratch {
	return &deltaChunkScratch{gam: make([]float64, c), delta: make([]float32, c*s), kTS0: make([]float32, c*s), qs0: make([]float32, c*s)}
}

// chunkHead runs rows [r0, r1) of value head h of sequence i in chunks of
// c rows from the state in m (M = Sᵀ, row j = value index j), leaving the
// state after r1−1 in m and the gated, normed outputs in out, as recurHead
// does row by row.
func (a *deltaArgs) chunkHead(i, h, r0, r1, c int, m []float32, sc *deltaChunkScratch) {
	sh := a.sh
	S, ch := sh.HeadDim, sh.Channels()
	kh := h % sh.KHeads
	scale := float32(1 / math.Sqrt(float64(S)))
	key := func(r int) []float32 { return a.qkv[r*ch+(sh.KHeads+kh)*S:][:S] }
	query := func(r int) []float32 { return a.qkv[r*ch+kh*S:][:S] }
	for c0 := r0; c0 < r1; c0 += c {
		n := min(c, r1-c0)
		// Γ_t as a log, so that Γ_t/Γ_s is one exp.
		var lg float64
		for t := range n {
			r := c0 + t
			lg += float64(softplus(a.alph[r*sh.VHeads+h]+a.dtBias[h]) * a.a[h])
			sc.gam[t] = lg
		}
		// S0ᵀk_t and S0ᵀq_t: row j of M dotted with k_t, q_t.
		for t := range n {
			k, q := key(c0+t), query(c0+t)
			for j := range S {
				mj := m[j*S : (j+1)*S]
				sc.kTS0[t*S+j] = dotF32(mj, k)
				sc.qs0[t*S+j] = dotF32(mj, q)
			}
		}
		// δ by forward substitution.
		for t := range n {
			r := c0 + t
			beta := sigmoid(a.beta[r*sh.VHeads+h])
			gt := float32(math.Exp(sc.gam[t]))
			v := a.qkv[r*ch+(2*sh.KHeads+h)*S:][:S]
			d := sc.delta[t*S : (t+1)*S]
			for j := range S {
				d[j] = v[j] - gt*sc.kTS0[t*S+j]
			}
			kt := key(r)
			for s := range t {
				w := float32(math.Exp(sc.gam[t]-sc.gam[s])) * dotF32(key(c0+s), kt)
				axpyF32(d, sc.delta[s*S:(s+1)*S], -w)
			}
			scaleF32(d, beta)
		}
		// Outputs, then the gated norm, as recurHead.
		for t := range n {
			r := c0 + t
			o := a.out[r*sh.VHeads*S+h*S:][:S]
			gt := float32(math.Exp(sc.gam[t]))
			qt := query(r)
			for j := range S {
				o[j] = gt * sc.qs0[t*S+j]
			}
			for s := 0; s <= t; s++ {
				w := float32(math.Exp(sc.gam[t]-sc.gam[s])) * dotF32(key(c0+s), qt)
				axpyF32(o, sc.delta[s*S:(s+1)*S], w)
			}
			scaleF32(o, scale)
			rmsNormRow(o, o, a.norm, sh.Eps)
			z := a.z[r*sh.VHeads*S+h*S:][:S]
			for j := range o {
				o[j] *= silu(z[j])
			}
		}
		// The state after the chunk: M[j] = Γ_n·M[j] + Σ_s Γ_n/Γ_s·δ_s[j]·k_s.
		last := sc.gam[n-1]
		scaleF32(m, float32(math.Exp(last)))
		for s := range n {
			w := float32(math.Exp(last - sc.gam[s]))
			k := key(c0 + s)
			d := sc.delta[s*S : (s+1)*S]
			for j := range S {
				axpyF32(m[j*S:(j+1)*S], k, w*d[j])
			}
		}
	}
}
