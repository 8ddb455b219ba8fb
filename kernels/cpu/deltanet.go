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
	spec                   specKeep
}

// specKeep is what a step with draft rows keeps for kernels.StateRollBack.
//
// Why per-row states and not a snapshot: the alternative, copying each
// speculating sequence's state before the step and, on a rejection,
// restoring it and running the accepted rows' updates again, costs one
// state copy per step instead of one per draft row, but it must also keep
// every layer's convolved q, k, v and gates of those rows (the scratch the
// next layer overwrites) and run a second recurrence pass after
// verification. A copy of a head's state (S² floats, already in cache from
// the update) is about the work of the update itself, and the row's matrix
// products, which every draft row pays anyway, cost far more (Qwen3.5-0.8B
// class, 2 threads: ~1.5 GFLOP of products per row against ~0.3 MFLOP of
// recurrence per layer), so keeping each row's state keeps the cost near
// that of the rows themselves and the code to the one pass. Memory: one
// slot's worth (StateConfig.SlotBytes) per draft row of the largest step
// seen, i.e. K states per speculating sequence besides its own slot,
// allocated when a step first needs it and kept for the next.
type specKeep struct {
	lanes []specLane  // the latest pass's speculating sequences, in batch order
	off   []int       // [sequence of the batch] its first kept state, −1 when it has no drafts
	rows  int         // kept states of the pass: Σ Drafts
	conv  [][]float32 // [layer][kept·Conv]
	ssm   [][]float32 // [layer][kept·SSM]
	pass  uint64      // bumped when a step's first DeltaNet call starts over at a layer ≤ the last one
	ran   []uint64    // [layer] the pass in which the layer last kept its states
	last  int         // the latest call's layer, −1 none
}

// specLane is one speculating sequence of the latest pass.
type specLane struct {
	slot   int32 // its State; −1 once rolled back
	drafts int
	off    int
}

func (s *stateStore) Config() kernels.StateConfig { return s.cfg }

// NewStateStore allocates zeroed slots.
func (b *Backend) NewStateStore(cfg kernels.StateConfig) (kernels.StateStore, error) {
	if cfg.Layers <= 0 || cfg.Slots <= 0 || cfg.Conv < 0 || cfg.SSM <= 0 {
		return nil, fmt.Errorf("cpu backend: invalid state config %+v", cfg)
	}
	s := &stateStore{cfg: cfg, conv: make([][]float32, cfg.Layers), ssm: make([][]float32, cfg.Layers)}
	s.spec = specKeep{conv: make([][]float32, cfg.Layers), ssm: make([][]float32, cfg.Layers), ran: make([]uint64, cfg.Layers), last: -1}
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
	keepOff            []int     // specKeep.off
	keptConv, keptSSM  []float32 // this layer's kept states (specKeep)
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
	if s.spec.rows > 0 {
		s.spec.ran[layer] = s.spec.pass
	}
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
		if q.Drafts < 0 || q.Drafts >= q.End-q.Start {
			return fmt.Errorf("cpu backend: DeltaNet: %d draft rows of a sequence of %d", q.Drafts, q.End-q.Start)
		}
		// A checkpoint is what forks and the prefix cache resume from: it
		// must never hold a row verification may still reject.
		if verified := bt.Positions[q.End-1-q.Drafts] + 1; q.Drafts > 0 && q.CheckpointAt > verified && q.CheckpointAt <= bt.Positions[q.End-1]+1 {
			return fmt.Errorf("cpu backend: DeltaNet: checkpoint at %d past the verified rows (up to %d)", q.CheckpointAt, verified)
		}
		prev = q.End
	}
	a.convSt, a.ssmSt = s.conv[layer], s.ssm[layer]
	if err := s.spec.start(s.cfg, layer, bt); err != nil {
		return err
	}
	if s.spec.rows > 0 {
		a.keepOff, a.keptConv, a.keptSSM = s.spec.off, s.spec.conv[layer], s.spec.ssm[layer]
	}
	return nil
}

// start lays out, for layer's call over bt, where each speculating
// sequence keeps its states: a call at a layer no later than the last one
// begins a new pass (a new step) and lays them out afresh; a later layer of
// the same pass must see the same sequences.
func (k *specKeep) start(cfg kernels.StateConfig, layer int, bt *kernels.Batch) error {
	if k.last < 0 || layer <= k.last {
		k.pass++
		k.lanes, k.off, k.rows = k.lanes[:0], k.off[:0], 0
		for _, q := range bt.Seqs {
			if q.Drafts == 0 {
				k.off = append(k.off, -1)
				continue
			}
			k.off = append(k.off, k.rows)
			k.lanes = append(k.lanes, specLane{slot: q.State, drafts: q.Drafts, off: k.rows})
			k.rows += q.Drafts
		}
	} else {
		same := len(k.off) == len(bt.Seqs)
		j := 0
		for i, q := range bt.Seqs {
			if !same {
				break
			}
			if q.Drafts > 0 {
				same = k.off[i] >= 0 && j < len(k.lanes) && k.lanes[j].slot == q.State && k.lanes[j].drafts == q.Drafts
				j++
			} else {
				same = k.off[i] < 0
			}
		}
		if !same {
			return fmt.Errorf("cpu backend: DeltaNet: layer %d's draft rows differ from the step's earlier layers'", layer)
		}
	}
	k.last = layer
	if k.rows == 0 {
		return nil
	}
	if n := k.rows * cfg.Conv; len(k.conv[layer]) < n {
		k.conv[layer] = make([]float32, n)
	}
	if n := k.rows * cfg.SSM; len(k.ssm[layer]) < n {
		k.ssm[layer] = make([]float32, n)
	}
	return nil
}

// RollBack puts the state slot's sequence had after kept of its latest
// step's drafts back in its slot (kernels.StateRollBack), every layer that
// step ran.
func (s *stateStore) RollBack(slot int32, kept int) error {
	k := &s.spec
	for i := range k.lanes {
		l := &k.lanes[i]
		if l.slot != slot {
			continue
		}
		if kept < 0 || kept > l.drafts {
			return fmt.Errorf("cpu backend: RollBack: %d of %d drafts kept", kept, l.drafts)
		}
		c := s.cfg
		if kept < l.drafts {
			at := l.off + kept
			for layer := range c.Layers {
				if k.ran[layer] != k.pass {
					continue // not run this step: its state never moved
				}
				copy(s.conv[layer][int(slot)*c.Conv:][:c.Conv], k.conv[layer][at*c.Conv:][:c.Conv])
				copy(s.ssm[layer][int(slot)*c.SSM:][:c.SSM], k.ssm[layer][at*c.SSM:][:c.SSM])
			}
		}
		l.slot = -1
		return nil
	}
	return fmt.Errorf("cpu backend: RollBack: slot %d had no draft rows in the latest step", slot)
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
	first, kept := a.keptRows(i) // the window after each of rows [first, End−1) is kept
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
		if r >= first && r < sq.End-1 {
			ks := kept[(r-first)*a.cfg.Conv:]
			for j, v := range h {
				ks[j*ch+c] = v
			}
		}
	}
	if ck == sq.End {
		keep()
	}
	for j, v := range h {
		st[j*ch+c] = v
	}
}

// keptRows is the first row of sequence i whose state is kept for a
// rollback and the sequence's first kept state in this layer (each next
// row's a state further on); End, nil when it has no drafts.
func (a *deltaArgs) keptRows(i int) (first int, conv []float32) {
	sq := a.b.Seqs[i]
	if sq.Drafts == 0 {
		return sq.End, nil
	}
	return sq.End - 1 - sq.Drafts, a.keptConv[a.keepOff[i]*a.cfg.Conv:]
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
	first, _ := a.keptRows(i)
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
		if r >= first && r < sq.End-1 {
			copy(a.keptSSM[(a.keepOff[i]+r-first)*a.cfg.SSM+h*S*S:][:S*S], m)
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
