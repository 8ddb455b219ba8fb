package engine

import (
	"fmt"
	"log/slog"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
)

// DeviceModel is a Model whose forward pass can leave the logits on its
// backend (models.Llama). When its DeviceSampler is not nil the engine
// samples there every row it can, so that only token ids and the logits of
// the rows sampled on the host cross to the host; otherwise it calls
// Forward.
type DeviceModel interface {
	Model
	// ForwardDevice runs b as Forward does and returns the logits of
	// b.LogitRows on the device: rows in LogitRows order, VocabSize() wide,
	// valid until the next call.
	ForwardDevice(b *kernels.Batch) (kernels.Tensor, error)
	DeviceSampler() kernels.DeviceSampler
}

// hostOnly reports whether s's next token must be sampled on the host from
// its logits: the one list of what the device sampler (kernels/cuda
// sample.cu) does not do. Everything else — greedy, temperature, top-k
// (up to sampleCap), top-p with top-k, min-p, repetition/presence/frequency
// penalties, logit_bias (on the kernel's copy of the row, which logprobs do
// not see), seeds, IgnoreEOS (which changes no logit), constraint masks
// (kernels.DeviceSampler.MaskLogits), min_tokens (its forbidden ids as a
// mask: earlyMask) and logprobs (LogprobRows, on the masked row as
// logprobs.go computes them) — is done on the device.
func hostOnly(s *Sequence, vocab int) bool {
	r, p := &s.req, &s.req.Sampling
	topK := p.TopK > 0 && p.TopK < vocab
	return s.emitted < r.MinTokens && r.Logprobs || // logprobs must not see min_tokens' edits (controls.go)
		p.Temperature > 0 && p.TopP > 0 && p.TopP < 1 && !topK || // top-p over the whole vocabulary
		p.Temperature > 0 && topK && p.TopK > sampleCap // more candidates than the kernel sorts
}

// A logit row's token before SampleRows answers.
const (
	onHost   int32 = -1 // = kernels.Undecided: both read the row back
	onDevice int32 = -2
)

// sampleCap is the most top-k candidates the device kernel sorts (SCAP in
// sample.cu); it leaves a row with more, ties included, Undecided.
const sampleCap = 1024

// stepLogits is what deliver samples from: for each logit row, the token the
// device chose, or the row's logits on the host.
type stepLogits struct {
	host []float32  // logits of the rows sampled on the host, VocabSize() each
	at   []int32    // logit row → its row in host; nil: row r is host row r
	toks []int32    // logit row → token sampled on the device, or -1; nil: none
	lps  []*Logprob // logit row → its logprobs computed on the device; nil: none
}

// token is the device's choice for logit row r, or -1.
func (l *stepLogits) token(r int) int32 {
	if l.toks == nil {
		return -1
	}
	return l.toks[r]
}

// logprob is logit row r's device-computed Logprob, or nil.
func (l *stepLogits) logprob(r int) *Logprob {
	if l.lps == nil {
		return nil
	}
	return l.lps[r]
}

// row is logit row r's logits on the host.
func (l *stepLogits) row(r, vocab int) []float32 {
	if l.at != nil {
		r = int(l.at[r])
	}
	return l.host[r*vocab : (r+1)*vocab]
}

// deviceSampling is the engine's device path, with loop-owned scratch
// reused across steps.
type deviceSampling struct {
	m      DeviceModel
	ds     kernels.DeviceSampler
	params []kernels.SampleParams
	masks  [][]uint32
	toks   []int32 // per logit row: a token, onHost or onDevice
	ids    []int32 // SampleRows' answer
	lpRows []kernels.LogprobRow
	lpOut  []kernels.RowLogprobs
	lps    []*Logprob
	early  [][]uint32 // per logit row: earlyMask's bitsets
	hist   []int32    // speculating sequences' penalty histories: tokens then drafts
	read   []int32    // logit rows read back
	at     []int32
	host   []float32
}

// newDeviceSampling is nil unless m samples on its device, which it logs,
// so that a device run shows which path its figures are of.
func newDeviceSampling(m Model) *deviceSampling {
	dm, ok := m.(DeviceModel)
	if !ok {
		return nil
	}
	ds := dm.DeviceSampler()
	if ds == nil {
		return nil
	}
	slog.Info("engine: tokens sampled on the device; logits read back only for host-only rows")
	return &deviceSampling{m: dm, ds: ds}
}

// verifies reports whether e's proposer may draft on the device path:
// n-gram and draft-model drafts are made on the host from tokens alone and
// verified from the device's per-row tokens (sampleOnDevice). The MTP head
// and an assistant read the target's hidden rows of each step, which no
// device model has been made to hand them, so those sequences decode
// plainly.
func (d *deviceSampling) verifies(e *Engine) bool {
	return e.mtp == nil && e.assist == nil
}

// forwardStep runs b and joins the masks: with a device sampler it samples
// there too (sampleOnDevice), without one the logits come back whole. A
// panic becomes err: it fails this step only.
func (e *Engine) forwardStep(b *kernels.Batch, plan *scheduler.Plan, masks *maskJobs) (sl *stepLogits, err error) {
	defer masks.wait()
	if e.dev == nil {
		logits, err := e.forward(b)
		if want := len(b.LogitRows) * e.model.VocabSize(); err == nil && len(logits) < want {
			err = fmt.Errorf("model returned %d logits, want %d", len(logits), want)
		}
		return &stepLogits{host: logits}, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = panicError("forward", r)
		}
	}()
	logits, err := e.dev.m.ForwardDevice(b)
	if err == nil && masks != nil {
		err = e.dev.ds.Sync() // the forward pass runs while the masks finish
	}
	masks.wait()
	if err != nil {
		return nil, err
	}
	return e.sampleOnDevice(plan, logits, masks)
}

// sampleOnDevice samples every logit row it can on the device, after
// applying those rows' constraint masks there, and reads back the logits of
// the rest: the hostOnly rows, rows whose mask failed (deliver reports the
// error), and rows the device left Undecided (sampled on the host with the
// draw deviceParams already took).
//
// A sequence carrying drafts (spec.go) has a logit row per draft and one
// more, each sampled on the device as a plain decode of that position
// would be: the penalties' history runs on through the drafts before it,
// min_tokens counts the drafts as delivered, and row i's draw is the i-th
// number the sequence's PRNG has not yet spent on a delivered token. The
// host's verify then reads the device's ids in order; the rows it will
// never reach (past the first that differs from its draft) are neither
// read back nor given logprobs, and only the draws of the rows it will
// deliver are spent (spend), so a seeded sequence draws exactly the
// numbers, in the order, that it would without drafts.
func (e *Engine) sampleOnDevice(plan *scheduler.Plan, logits kernels.Tensor, masks *maskJobs) (*stepLogits, error) {
	d, vocab := e.dev, e.model.VocabSize()
	d.params, d.masks, d.toks, d.hist = d.params[:0], d.masks[:0], d.toks[:0], d.hist[:0]
	device := false
	for _, it := range plan.Items {
		if !it.Sample {
			continue
		}
		s := owner(it.Seq)
		j := masks.of(s)
		dev := !hostOnly(s, vocab) && (j == nil || j.err == nil)
		hist := it.Seq.Tokens
		if dev && len(it.Draft) > 0 && s.sampler.penalize() {
			// Row i's history is the tokens and drafts[:i]; one copy serves
			// every row. An earlier sequence's slice of d.hist stays valid
			// when append moves it: SampleRows reads the old array.
			at := len(d.hist)
			d.hist = append(append(d.hist, it.Seq.Tokens...), it.Draft...)
			hist = d.hist[at:len(d.hist):len(d.hist)]
		}
		for i := 0; i <= len(it.Draft); i++ {
			var p kernels.SampleParams // the zero value (argmax) for a host row: its id is not used
			var bits []uint32
			tok := onHost
			if dev {
				p, tok, device = s.sampler.deviceParams(hist[:len(it.Seq.Tokens)+i], i), onDevice, true
				p.Bias = s.req.LogitBias // as adjust adds it, over the masks (-Inf stays -Inf)
				if j != nil {
					bits = j.bits // one row only: a constrained sequence has no drafts (spec.go)
				}
				if s.emitted+i < s.req.MinTokens {
					bits = e.earlyMask(len(d.masks), bits, s)
				}
			}
			d.params, d.masks, d.toks = append(d.params, p), append(d.masks, bits), append(d.toks, tok)
		}
	}
	if device {
		if err := d.ds.MaskLogits(logits, d.masks); err != nil {
			return nil, err
		}
		d.ids = grow(d.ids, len(d.params))
		if err := d.ds.SampleRows(logits, d.params, d.ids); err != nil {
			return nil, err
		}
		r := 0
		for _, it := range plan.Items {
			if !it.Sample {
				continue
			}
			n := 1 + len(it.Draft)
			if d.toks[r] == onDevice {
				owner(it.Seq).sampler.spend(verifiedRows(d.toks[r:r+n], d.ids[r:r+n], it.Draft))
			}
			r += n
		}
		if err := e.logprobsOnDevice(plan, logits); err != nil {
			return nil, err
		}
	}
	d.read, d.at = d.read[:0], d.at[:0]
	for r, tok := range d.toks {
		d.at = append(d.at, int32(len(d.read)))
		if tok == onHost {
			d.read = append(d.read, int32(r))
		}
	}
	d.host = grow(d.host, len(d.read)*vocab)
	if len(d.read) > 0 {
		if err := d.ds.ReadRows(logits, d.read, d.host); err != nil {
			return nil, err
		}
	}
	sl := &stepLogits{host: d.host, at: d.at, toks: d.toks}
	if device {
		sl.lps = d.lps // else the scratch is an earlier step's, maybe of fewer rows
	}
	return sl, nil
}

// unread marks a logit row verify never reaches: not read back, no logprobs.
const unread int32 = -3

// verifiedRows fills toks, one sequence's device-sampled rows, from the
// device's ids as verify (spec.go) will read them: in order while each
// token equals its draft, up to the first that differs or the last row;
// the rows past that are unread. From a row the device left Undecided on,
// every row is sampled on the host, in order, with the draws still unspent,
// since whether the rows after it are reached turns on the host's token.
// It returns how many rows the device decided that verify delivers.
func verifiedRows(toks, ids, draft []int32) int {
	for i, id := range ids {
		if id == kernels.Undecided {
			for k := i; k < len(toks); k++ {
				toks[k] = onHost
			}
			return i
		}
		toks[i] = id
		if i == len(draft) || id != draft[i] {
			for k := i + 1; k < len(toks); k++ {
				toks[k] = unread
			}
			return i + 1
		}
	}
	return len(ids) // unreachable: the last row always stops
}

// logprobsOnDevice computes on the device the logprobs of the rows sampled
// there whose request asks for them (a row left to the host gets them
// there, from its logits).
func (e *Engine) logprobsOnDevice(plan *scheduler.Plan, logits kernels.Tensor) error {
	d := e.dev
	d.lpRows, d.lps = d.lpRows[:0], grow(d.lps, len(d.toks))
	clear(d.lps)
	r := 0
	for _, it := range plan.Items {
		if !it.Sample {
			continue
		}
		s := owner(it.Seq)
		for end := r + 1 + len(it.Draft); r < end; r++ {
			if s.req.Logprobs && d.toks[r] >= 0 {
				d.lpRows = append(d.lpRows, kernels.LogprobRow{Row: r, Token: d.toks[r], K: s.req.TopLogprobs})
			}
		}
	}
	if len(d.lpRows) == 0 {
		return nil
	}
	d.lpOut = grow(d.lpOut, len(d.lpRows))
	if err := d.ds.LogprobRows(logits, d.lpRows, d.lpOut); err != nil {
		return err
	}
	for i, q := range d.lpRows {
		o := &d.lpOut[i]
		lp := &Logprob{Logprob: o.Logprob}
		for _, t := range o.Top {
			lp.Top = append(lp.Top, TopLogprob{ID: t.ID, Logprob: t.Logprob})
		}
		d.lps[q.Row] = lp
	}
	return nil
}

// earlyMask is the mask of a row still short of its min_tokens: bits (all
// tokens when nil) less the end-of-generation and stop ids, as adjust
// forbids them on the host. It is built in row r's scratch.
func (e *Engine) earlyMask(r int, bits []uint32, s *Sequence) []uint32 {
	d, vocab := e.dev, e.model.VocabSize()
	for len(d.early) <= r {
		d.early = append(d.early, make([]uint32, (vocab+31)/32))
	}
	m := d.early[r]
	if bits != nil {
		copy(m, bits)
	} else {
		for w := range m {
			m[w] = math.MaxUint32
		}
	}
	for _, ids := range [][]int32{e.cfg.EOG, s.req.StopTokens} {
		for _, id := range ids {
			if id >= 0 && int(id) < vocab {
				m[id/32] &^= 1 << (id % 32)
			}
		}
	}
	return m
}

// deviceParams are s's settings for the device's token at row i of its
// step (i > 0: a draft's verify row, spec.go), with its penalty window of
// history; at a positive temperature the row's draw is the i-th number not
// yet spent, taken from the PRNG now if need be and kept (ahead) for the
// token that uses it, on the device or on the host should the device
// leave the row undecided.
func (s *sampler) deviceParams(history []int32, i int) kernels.SampleParams {
	p := &s.p
	dp := kernels.SampleParams{Temperature: p.Temperature, TopK: int32(p.TopK), TopP: p.TopP, MinP: p.MinP,
		RepetitionPenalty: p.RepetitionPenalty, PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty}
	if s.penalize() {
		dp.Penalized = history
		if n := p.PenaltyLastN; n >= 0 && len(history) > n {
			dp.Penalized = history[len(history)-n:]
		}
	}
	if s.draws() {
		for len(s.ahead) <= i {
			s.ahead = append(s.ahead, s.rng.Float64())
		}
		dp.U = s.ahead[i]
	}
	return dp
}

// spend drops the first n numbers taken ahead: n tokens the device
// sampled with them are delivered. A greedy sampler took none.
func (s *sampler) spend(n int) {
	n = min(n, len(s.ahead))
	s.ahead = s.ahead[:copy(s.ahead, s.ahead[n:])]
}

// next is the number a draw uses: the first taken ahead for the device,
// else the PRNG's next.
func (s *sampler) next() float64 {
	if len(s.ahead) > 0 {
		u := s.ahead[0]
		s.spend(1)
		return u
	}
	return s.rng.Float64()
}

// of is s's mask job, nil when s has no constraint.
func (m *maskJobs) of(s *Sequence) *maskJob {
	if m == nil {
		return nil
	}
	for i := range m.jobs {
		if m.jobs[i].s == s {
			return &m.jobs[i]
		}
	}
	return nil
}

func grow[T any](f []T, n int) []T {
	if cap(f) < n {
		return make([]T, n)
	}
	return f[:n]
}
