package cpu

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// stateStore keeps each recurrent layer's slots in float32 (llama.cpp and
// Ollama keep them so too: the state sums every token it has seen, and
// rounding it to 16 bits each step drifts):
//
//	conv[layer][slot*Conv + i*channels + c]   input of channel c, i steps before the newest (i = Kernel−2 … 0 oldest first)
//	ssm[layer][slot*SSM + (h*S + j)*S + i]   S_h[i][j]: key index i, value index j (ggml's transposed layout)
type stateStore struct {
	cfg       kernels.StateConfig
	conv, ssm [][]float32
	// The call in progress and the closures handed to parallelFor, kept
	// here (the store's model calls from one goroutine) so that a call
	// allocates nothing.
	args                   deltaArgs
	convFn, normFn, headFn func(lo, hi int)
}

func (s *stateStore) Config() kernels.StateConfig { return s.cfg }

// NewStateStore allocates zeroed slots.
func (b *Backend) NewStateStore(cfg kernels.StateConfig) (kernels.StateStore, error) {
	if cfg.Layers <= 0 || cfg.Slots <= 0 || cfg.Conv < 0 || cfg.SSM <= 0 {
		return nil, fmt.Errorf("cpu backend: invalid state config %+v", cfg)
	}
	s := &stateStore{cfg: cfg, conv: make([][]float32, cfg.Layers), ssm: make([][]float32, cfg.Layers)}
	for l := range cfg.Layers {
		s.conv[l] = make([]float32, cfg.Slots*cfg.Conv)
		s.ssm[l] = make([]float32, cfg.Slots*cfg.SSM)
	}
	a := &s.args
	s.convFn = func(lo, hi int) {
		ch := a.sh.Channels()
		for i := lo; i < hi; i++ {
			a.convChannel(i/ch, i%ch)
		}
	}
	s.normFn = func(lo, hi int) {
		for r := lo; r < hi; r++ {
			a.l2normRow(r)
		}
	}
	s.headFn = func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a.recurHead(i/a.sh.VHeads, i%a.sh.VHeads)
		}
	}
	return s, nil
}

func asStateStore(st kernels.StateStore) (*stateStore, error) {
	s, ok := st.(*stateStore)
	if !ok {
		return nil, fmt.Errorf("cpu backend: state store %T was not made by this backend", st)
	}
	return s, nil
}

// CopyState copies every layer of slot src to slot dst.
func (b *Backend) CopyState(st kernels.StateStore, dst, src int32) error {
	s, err := asStateStore(st)
	if err != nil {
		return err
	}
	c := s.cfg
	if dst < 0 || src < 0 || int(dst) >= c.Slots || int(src) >= c.Slots {
		return fmt.Errorf("cpu backend: CopyState %d → %d of %d slots", src, dst, c.Slots)
	}
	if dst == src {
		return nil
	}
	for l := range c.Layers {
		copy(s.conv[l][int(dst)*c.Conv:int(dst+1)*c.Conv], s.conv[l][int(src)*c.Conv:int(src+1)*c.Conv])
		copy(s.ssm[l][int(dst)*c.SSM:int(dst+1)*c.SSM], s.ssm[l][int(src)*c.SSM:int(src+1)*c.SSM])
	}
	return nil
}

// SigmoidMul: dst *= sigmoid(gate) for the first n rows.
func (b *Backend) SigmoidMul(dst, gate kernels.Tensor, n int) error {
	d, dt, err := f32Of(dst, "SigmoidMul dst")
	if err != nil {
		return err
	}
	g, gt, err := f32Of(gate, "SigmoidMul gate")
	if err != nil {
		return err
	}
	m := n * dt.cols()
	if dt.cols() != gt.cols() || m > len(d) || m > len(g) {
		return fmt.Errorf("cpu backend: SigmoidMul: %d rows of %v and %v", n, dt.shape, gt.shape)
	}
	for i := range d[:m] {
		d[i] *= sigmoid(g[i])
	}
	return nil
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func silu(x float32) float32 { return x * sigmoid(x) }

// softplus is ggml_compute_softplus_f32: log(1 + eˣ), x itself above 20.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// deltaArgs is one DeltaNet call's operands, checked once.
type deltaArgs struct {
	sh                 kernels.DeltaNetShape
	qkv, z, beta, alph []float32
	out                []float32
	conv, dtBias, a    []float32
	norm               []float32
	convSt, ssmSt      []float32 // this layer's slots
	cfg                kernels.StateConfig
	b                  *kernels.Batch
}

// DeltaNet runs a Gated DeltaNet layer's core (kernels.DeltaNetOps) in its
// recurrent form: each sequence's rows one after another, every row's state
// update exactly the one a lone decode step makes, so a row's result does
// not depend on how its prompt was split into steps or on the rows beside
// it (batch invariance). deltaChunk (deltanet_chunk.go) is the chunked form.
func (b *Backend) DeltaNet(out, qkv, z, beta, alpha kernels.Tensor, w kernels.DeltaNetWeights, sh kernels.DeltaNetShape,
	st kernels.StateStore, layer int, bt *kernels.Batch) error {
	s, err := asStateStore(st)
	if err != nil {
		return err
	}
	if err := s.args.set(s, out, qkv, z, beta, alpha, w, sh, layer, bt); err != nil {
		return err
	}
	defer func() { s.args = deltaArgs{} }() // do not pin the caller's buffers
	nSeq := len(bt.Seqs)
	// The convolution: each channel of each sequence on its own; then q and
	// k to unit length, per head, before any value head reads them; then the
	// recurrence and the gated norm, each value head of each sequence.
	b.parallelFor(nSeq*sh.Channels(), 64, s.convFn)
	b.parallelFor(bt.Seqs[nSeq-1].End, 8, s.normFn)
	b.parallelFor(nSeq*sh.VHeads, 1, s.headFn)
	return nil
}

func (a *deltaArgs) set(s *stateStore, out, qkv, z, beta, alpha kernels.Tensor, w kernels.DeltaNetWeights, sh kernels.DeltaNetShape,
	layer int, bt *kernels.Batch) error {
	*a = deltaArgs{sh: sh, cfg: s.cfg, b: bt}
	ts := []struct {
		dst  *[]float32
		t    kernels.Tensor
		name string
		cols int
	}{
		{&a.out, out, "DeltaNet out", sh.VHeads * sh.HeadDim}, {&a.qkv, qkv, "DeltaNet qkv", sh.Channels()},
		{&a.z, z, "DeltaNet z", sh.VHeads * sh.HeadDim}, {&a.beta, beta, "DeltaNet beta", sh.VHeads}, {&a.alph, alpha, "DeltaNet alpha", sh.VHeads},
		{&a.conv, w.Conv, "DeltaNet conv weight", sh.Kernel}, {&a.dtBias, w.DtBias, "DeltaNet dt bias", sh.VHeads},
		{&a.a, w.A, "DeltaNet A", sh.VHeads}, {&a.norm, w.Norm, "DeltaNet norm weight", sh.HeadDim},
	}
	if sh.KHeads <= 0 || sh.VHeads%max(sh.KHeads, 1) != 0 || sh.HeadDim <= 0 || sh.Kernel < 1 || sh.Kernel > 17 || len(bt.Seqs) == 0 {
		return fmt.Errorf("cpu backend: DeltaNet: shape %+v, %d sequences", sh, len(bt.Seqs))
	}
	n := bt.Seqs[len(bt.Seqs)-1].End
	if len(bt.Positions) < n {
		return fmt.Errorf("cpu backend: DeltaNet: %d positions for %d rows", len(bt.Positions), n)
	}
	for _, t := range ts {
		v, ct, err := f32Of(t.t, t.name)
		if err != nil {
			return err
		}
		if ct.cols() != t.cols || (t.name != "DeltaNet conv weight" && len(ct.shape) == 2 && len(v) < n*t.cols) {
			return fmt.Errorf("cpu backend: %s is %v, want %d columns for %d rows", t.name, ct.shape, t.cols, n)
		}
		*t.dst = v
	}
	if len(a.conv) != sh.Channels()*sh.Kernel {
		return fmt.Errorf("cpu backend: DeltaNet: conv weight of %d values, want %d×%d", len(a.conv), sh.Channels(), sh.Kernel)
	}
	if layer < 0 || layer >= s.cfg.Layers || s.cfg.Conv != (sh.Kernel-1)*sh.Channels() || s.cfg.SSM != sh.VHeads*sh.HeadDim*sh.HeadDim {
		return fmt.Errorf("cpu backend: DeltaNet: layer %d of state %+v for shape %+v", layer, s.cfg, sh)
	}
	prev := 0
	for _, q := range bt.Seqs {
		if q.Start != prev || q.End <= q.Start || q.State < 0 || int(q.State) >= s.cfg.Slots ||
			q.CheckpointAt > 0 && (q.Checkpoint < 0 || int(q.Checkpoint) >= s.cfg.Slots || q.Checkpoint == q.State) ||
			q.Seeded && (q.Seed < 0 || int(q.Seed) >= s.cfg.Slots || q.Seed == q.State) {
			return fmt.Errorf("cpu backend: DeltaNet: sequence rows [%d, %d) after %d, state slot %d, checkpoint slot %d, of %d",
				q.Start, q.End, prev, q.State, q.Checkpoint, s.cfg.Slots)
		}
		prev = q.End
	}
	a.convSt, a.ssmSt = s.conv[layer], s.ssm[layer]
	return nil
}

// fresh reports whether sequence i starts this step at position 0: its slot
// holds a previous owner's state, which it must not read.
func (a *deltaArgs) fresh(i int) bool { return a.b.Positions[a.b.Seqs[i].Start] == 0 }

// checkpointRow is the row of sequence i before which its state is at
// CheckpointAt (End when the step ends there), −1 when this step does not
// reach it.
func (a *deltaArgs) checkpointRow(i int) int {
	sq := a.b.Seqs[i]
	if sq.CheckpointAt <= 0 {
		return -1
	}
	r := sq.Start + int(sq.CheckpointAt-a.b.Positions[sq.Start])
	if r < sq.Start || r > sq.End {
		return -1
	}
	return r
}

// convChannel runs channel c of sequence i through the causal convolution
// and silu, in place in qkv, and keeps its last Kernel−1 inputs.
func (a *deltaArgs) convChannel(i, c int) {
	sq, ch, k := a.b.Seqs[i], a.sh.Channels(), a.sh.Kernel
	w := a.conv[c*k : (c+1)*k]
	st := a.convSt[int(sq.State)*a.cfg.Conv:]
	var hist [16]float32 // the window, oldest first; Kernel ≤ 17 (checked at load)
	h := hist[:k-1]
	if !a.fresh(i) {
		src := st
		if sq.Seeded {
			src = a.convSt[int(sq.Seed)*a.cfg.Conv:]
		}
		for j := range h {
			h[j] = src[j*ch+c]
		}
	}
	ck := a.checkpointRow(i)
	keep := func() {
		cs := a.convSt[int(sq.Checkpoint)*a.cfg.Conv:]
		for j, v := range h {
			cs[j*ch+c] = v
		}
	}
	for r := sq.Start; r < sq.End; r++ {
		if r == ck {
			keep()
		}
		x := a.qkv[r*ch+c]
		var y float32
		for j, v := range h {
			y += v * w[j]
		}
		y += x * w[k-1]
		if len(h) > 0 {
			copy(h, h[1:])
			h[len(h)-1] = x
		}
		a.qkv[r*ch+c] = silu(y)
	}
	if ck == sq.End {
		keep()
	}
	for j, v := range h {
		st[j*ch+c] = v
	}
}

// l2normRow scales each q and k head of row r to unit length: x/√(Σx²+eps).
func (a *deltaArgs) l2normRow(r int) {
	sh := a.sh
	row := a.qkv[r*sh.Channels() : r*sh.Channels()+2*sh.KHeads*sh.HeadDim]
	for h := range 2 * sh.KHeads {
		v := row[h*sh.HeadDim : (h+1)*sh.HeadDim]
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		s := float32(1 / math.Sqrt(ss+float64(sh.Eps)))
		for j := range v {
			v[j] *= s
		}
	}
}

// recurHead runs value head h of sequence i over its rows:
//
//	M = S_hᵀ, M[j] the row of value index j:  M *= e^g;  δ_j = β(v_j − M[j]·k);  M[j] += δ_j k;  o_j = M[j]·q / √S
//
// then writes rmsnorm(o)·Norm·silu(z) into out.
func (a *deltaArgs) recurHead(i, h int) {
	sh, sq := a.sh, a.b.Seqs[i]
	S, ch := sh.HeadDim, sh.Channels()
	kh := h % sh.KHeads
	m := a.ssmSt[int(sq.State)*a.cfg.SSM+h*S*S:][:S*S]
	switch {
	case a.fresh(i):
		clear(m)
	case sq.Seeded:
		copy(m, a.ssmSt[int(sq.Seed)*a.cfg.SSM+h*S*S:][:S*S])
	}
	scale := float32(1 / math.Sqrt(float64(S)))
	ck := a.checkpointRow(i)
	keep := func() { copy(a.ssmSt[int(sq.Checkpoint)*a.cfg.SSM+h*S*S:][:S*S], m) }
	for r := sq.Start; r < sq.End; r++ {
		if r == ck {
			keep()
		}
		row := a.qkv[r*ch : (r+1)*ch]
		q := row[kh*S : (kh+1)*S]
		k := row[(sh.KHeads+kh)*S : (sh.KHeads+kh+1)*S]
		v := row[(2*sh.KHeads+h)*S : (2*sh.KHeads+h+1)*S]
		beta := sigmoid(a.beta[r*sh.VHeads+h])
		decay := float32(math.Exp(float64(softplus(a.alph[r*sh.VHeads+h]+a.dtBias[h]) * a.a[h])))
		o := a.out[r*sh.VHeads*S+h*S : r*sh.VHeads*S+(h+1)*S]
		for j := range S {
			mj := m[j*S : (j+1)*S]
			d := (v[j] - deltaScaleDot(mj, k, decay)) * beta
			o[j] = deltaAxpyDot(mj, k, q, d) * scale
		}
		rmsNormRow(o, o, a.norm, sh.Eps)
		z := a.z[r*sh.VHeads*S+h*S : r*sh.VHeads*S+(h+1)*S]
		for j := range o {
			o[j] *= silu(z[j])
		}
	}
	if ck == sq.End {
		keep()
	}
}

func scaleF32(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// axpyF32: y += a·x.
func axpyF32(y, x []float32, a float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// deltaScaleDotGeneric: m *= s, then Σ m·k.
func deltaScaleDotGeneric(m, k []float32, s float32) float32 {
	k = k[:len(m)]
	var acc float32
	for i := range m {
		m[i] *= s
		acc += m[i] * k[i]
	}
	return acc
}

// deltaAxpyDotGeneric: m += d·k, then Σ m·q.
func deltaAxpyDotGeneric(m, k, q []float32, d float32) float32 {
	k, q = k[:len(m)], q[:len(m)]
	var acc float32
	for i := range m {
		m[i] += d * k[i]
		acc += m[i] * q[i]
	}
	return acc
}
