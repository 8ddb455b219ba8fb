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
	replayFn               func(lo, hi int)
	be                     *Backend
}

// specKeep is what a step with draft rows keeps for kernels.StateRollBack:
// each speculating sequence's state before its last verified row (a
// snapshot, one slot's worth per sequence) and, for that row and each
// draft but the last, the row's inputs to the recurrence (the q, k, v row before and
// after the convolution, β and the decay of each value head: Channels·2 +
// 2·VHeads floats a row, a layer). A rollback to kept drafts restores the
// snapshot and runs those rows' updates again (replayHead), with the same
// code as the step (deltaRow), so the state matches bit for bit. Memory,
// grown to the largest step seen and kept: a slot's worth per speculating
// sequence and (2·Channels + 2·VHeads)·4 bytes per draft row per layer
// (Qwen3.5's shape: 1 MiB and 48 KiB a layer).
//
// Why not a copy of the state after every draft row (the way vLLM and
// llama.cpp keep intermediate states): on the CPU each copy writes the
// whole state to memory, once per draft row, and that dominated. On a
// synthetic hybrid of Qwen3.5's DeltaNet shape (16 value heads of 128: 1 MiB
// of state a layer, 6 such layers; BenchmarkHybridSpecStep, 2 threads, a
// 7-row step over the same rows without drafts, load 4-6, the two kernels
// run by run), per-row copies cost 1.15-1.20x; the snapshot and replay
// 1.05-1.07x rolled back to the verified row and 1.08-1.11x to the last
// draft but one (6 rows replayed). The snapshot is one copy a step, and a
// replay touches each head's state (64 KiB, in cache) once per replayed
// row; a step whose drafts are all kept replays nothing.
type specKeep struct {
	lanes []specLane // the latest pass's speculating sequences, in batch order
	lane  []int      // [sequence of the batch] its index in lanes, −1 when it has no drafts
	rows  int        // rows kept per layer: Σ Drafts
	sh    kernels.DeltaNetShape
	// By layer: snapshots [lane·Conv], [lane·SSM]; rows [row·Channels] before
	// and after the convolution; [row·2·VHeads] β then the decay.
	snapConv, snapSSM [][]float32
	raw, qkv, gates   [][]float32
	pass              uint64   // bumped when a call starts over at a layer ≤ the last one: a new step
	ran               []uint64 // [layer] the pass in which the layer last kept its rows
	last              int      // the latest call's layer, −1 none
	// The rollback in progress, for replayFn.
	slot     int32
	at, kept int // the lane, and the drafts it keeps
}

// specLane is one speculating sequence of the latest pass.
type specLane struct {
	slot   int32 // its State; −1 once rolled back
	drafts int
	off    int // its first row among the kept rows
}

func (s *stateStore) Config() kernels.StateConfig { return s.cfg }

// NewStateStore allocates zeroed slots.
func (b *Backend) NewStateStore(cfg kernels.StateConfig) (kernels.StateStore, error) {
	if cfg.Layers <= 0 || cfg.Slots <= 0 || cfg.Conv < 0 || cfg.SSM <= 0 {
		return nil, fmt.Errorf("cpu backend: invalid state config %+v", cfg)
	}
	s := &stateStore{cfg: cfg, conv: make([][]float32, cfg.Layers), ssm: make([][]float32, cfg.Layers)}
	mk := func() [][]float32 { return make([][]float32, cfg.Layers) }
	s.spec = specKeep{snapConv: mk(), snapSSM: mk(), raw: mk(), qkv: mk(), gates: mk(), ran: make([]uint64, cfg.Layers), last: -1}
	s.be = b
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
	s.replayFn = func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s.replayHead(i/s.spec.sh.VHeads, i%s.spec.sh.VHeads)
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
	spec               *specKeep
	layer              int
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
	s.spec.keepRows(s.spec.raw[layer], s.args.qkv, bt, sh.Channels()) // before the convolution
	b.parallelFor(nSeq*sh.Channels(), 64, s.convFn)
	b.parallelFor(bt.Seqs[nSeq-1].End, 8, s.normFn)
	s.spec.keepRows(s.spec.qkv[layer], s.args.qkv, bt, sh.Channels()) // after it and the norms
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
	if err := s.spec.start(s.cfg, sh, layer, bt); err != nil {
		return err
	}
	a.spec, a.layer = &s.spec, layer
	return nil
}

// start lays out, for layer's call over bt, what each speculating sequence
// keeps: a call at a layer no later than the last one begins a new pass (a
// new step) and lays it out afresh; a later layer of the same pass must see
// the same sequences.
func (k *specKeep) start(cfg kernels.StateConfig, sh kernels.DeltaNetShape, layer int, bt *kernels.Batch) error {
	if k.last < 0 || layer <= k.last {
		k.pass++
		k.lanes, k.lane, k.rows, k.sh = k.lanes[:0], k.lane[:0], 0, sh
		for _, q := range bt.Seqs {
			if q.Drafts == 0 {
				k.lane = append(k.lane, -1)
				continue
			}
			k.lane = append(k.lane, len(k.lanes))
			k.lanes = append(k.lanes, specLane{slot: q.State, drafts: q.Drafts, off: k.rows})
			k.rows += q.Drafts
		}
	} else {
		same := len(k.lane) == len(bt.Seqs) && k.sh == sh
		for i, q := range bt.Seqs {
			if !same {
				break
			}
			if l := k.lane[i]; l >= 0 {
				same = k.lanes[l].slot == q.State && k.lanes[l].drafts == q.Drafts
			} else {
				same = q.Drafts == 0
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
	grow := func(v *[]float32, n int) {
		if len(*v) < n {
			*v = make([]float32, n)
		}
	}
	grow(&k.snapConv[layer], len(k.lanes)*cfg.Conv)
	grow(&k.snapSSM[layer], len(k.lanes)*cfg.SSM)
	grow(&k.raw[layer], k.rows*sh.Channels())
	grow(&k.qkv[layer], k.rows*sh.Channels())
	grow(&k.gates[layer], k.rows*2*sh.VHeads)
	return nil
}

// keepRows copies each speculating sequence's kept rows of src (its rows
// but the last draft, cols wide) to dst.
func (k *specKeep) keepRows(dst, src []float32, bt *kernels.Batch, cols int) {
	if k.rows == 0 {
		return
	}
	for i, q := range bt.Seqs {
		if l := k.lane[i]; l >= 0 {
			first := q.End - 1 - q.Drafts
			copy(dst[k.lanes[l].off*cols:][:q.Drafts*cols], src[first*cols:])
		}
	}
}

// keptRow is where sequence i keeps row r's values in this layer: its index
// among the kept rows (−1: the row is not kept) and the sequence's lane
// (−1: it has no drafts).
func (a *deltaArgs) keptRow(i, r int) (row, lane int) {
	if a.spec == nil || a.spec.rows == 0 {
		return -1, -1
	}
	l, sq := a.spec.lane[i], a.b.Seqs[i]
	if first := sq.End - 1 - sq.Drafts; l < 0 || r < first || r >= sq.End-1 {
		return -1, l
	}
	return a.spec.lanes[l].off + r - (sq.End - 1 - sq.Drafts), l
}

// RollBack puts the state slot's sequence had after kept of its latest
// step's drafts back in its slot (kernels.StateRollBack), in every layer
// that step ran: the snapshot, and the updates of its verified row and the
// kept drafts run again.
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
		if kept < l.drafts {
			c, ch, w := s.cfg, k.sh.Channels(), k.sh.Kernel-1
			for layer := range c.Layers {
				if k.ran[layer] != k.pass {
					continue // not run this step: its state never moved
				}
				// The window after the kept drafts: the last w of the
				// snapshot's w inputs and the kept+1 rows' own, oldest first.
				dst, snap, raw := s.conv[layer][int(slot)*c.Conv:][:c.Conv], k.snapConv[layer][i*c.Conv:][:c.Conv], k.raw[layer][l.off*ch:]
				for j := range w {
					if src := kept + 1 + j; src < w {
						copy(dst[j*ch:][:ch], snap[src*ch:])
					} else {
						copy(dst[j*ch:][:ch], raw[(src-w)*ch:])
					}
				}
			}
			k.slot, k.at, k.kept = slot, i, kept
			s.be.parallelFor(c.Layers*k.sh.VHeads, 1, s.replayFn)
		}
		l.slot = -1
		return nil
	}
	return fmt.Errorf("cpu backend: RollBack: slot %d had no draft rows in the latest step", slot)
}

// replayHead puts value head h of layer's rollback slot back to the
// snapshot and runs the update of each kept row again.
func (s *stateStore) replayHead(layer, h int) {
	k, c := &s.spec, s.cfg
	if k.ran[layer] != k.pass {
		return
	}
	sh := k.sh
	S, ch, vh := sh.HeadDim, sh.Channels(), sh.VHeads
	kh := h % sh.KHeads
	l := k.lanes[k.at]
	m := s.ssm[layer][int(k.slot)*c.SSM+h*S*S:][:S*S]
	copy(m, k.snapSSM[layer][k.at*c.SSM+h*S*S:][:S*S])
	for j := 0; j <= k.kept; j++ {
		row := k.qkv[layer][(l.off+j)*ch:][:ch]
		g := k.gates[layer][(l.off+j)*2*vh:]
		deltaRow(m, S, row[kh*S:(kh+1)*S], row[(sh.KHeads+kh)*S:(sh.KHeads+kh+1)*S], row[(2*sh.KHeads+h)*S:(2*sh.KHeads+h+1)*S],
			g[h], g[vh+h], 0, nil)
	}
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
		if kr, l := a.keptRow(i, r); kr >= 0 && kr == a.spec.lanes[l].off { // the window before the first kept row
			snap := a.spec.snapConv[a.layer][l*a.cfg.Conv:]
			for j, v := range h {
				snap[j*ch+c] = v
			}
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
		if kr, l := a.keptRow(i, r); kr >= 0 { // for a rollback's replay: the state before, the row's gates
			if kr == a.spec.lanes[l].off {
				copy(a.spec.snapSSM[a.layer][l*a.cfg.SSM+h*S*S:][:S*S], m)
			}
			g := a.spec.gates[a.layer][kr*2*sh.VHeads:]
			g[h], g[sh.VHeads+h] = beta, decay
		}
		deltaRow(m, S, q, k, v, beta, decay, scale, o)
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

// deltaRow is one row's update of a value head's state M = Sᵀ (S rows of
// S) from its q, k, v, β and decay, writing o = Mᵀq·scale when o is not
// nil: the one code both a step and a rollback's replay run, so that they
// leave the same state bit for bit.
func deltaRow(m []float32, S int, q, k, v []float32, beta, decay, scale float32, o []float32) {
	for j := range S {
		mj := m[j*S : (j+1)*S]
		d := (v[j] - deltaScaleDot(mj, k, decay)) * beta
		r := deltaAxpyDot(mj, k, q, d)
		if o != nil {
			o[j] = r * scale
		}
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
