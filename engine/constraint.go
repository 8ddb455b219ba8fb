package engine

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/scheduler"
)

// Constraint restricts the tokens a sequence may sample (a grammar, a JSON
// Schema), set on Request.Constraint. The engine calls Mask once before each
// token is sampled, on a goroutine of its own while the forward pass runs,
// then, on the loop, Commit with the token sampled. The two never overlap
// for one sequence and neither is called after the sequence ends, so an
// implementation needs no locking and its owner may free it once Done is
// closed.
type Constraint interface {
	// Mask writes the allowed next tokens as a bitset: token i is allowed
	// when bit i%32 of dst[i/32] is set. len(dst) is (VocabSize+31)/32 and
	// dst is zeroed. An error ends the sequence with FinishError.
	Mask(dst []uint32) error
	// Commit advances the constraint by the sampled token. It is not called
	// for an end-of-generation or stop token, which end the sequence.
	Commit(tok int32) error
}

// maskJobs are the masks of one step's constrained sequences, computed
// beside the forward pass: start launches them, wait joins them.
type maskJobs struct {
	wg   sync.WaitGroup
	jobs []maskJob
}

type maskJob struct {
	s    *Sequence
	buf  *[]uint32 // from maskBufs; bits is *buf
	bits []uint32
	err  error
}

// maskBufs recycles mask bitsets across steps (6 KiB each for a 49,152-token
// vocabulary) so a constrained step allocates nothing in steady state.
var maskBufs sync.Pool

// startMasks begins computing the mask of every sequence in plan that samples
// this step and has a Constraint; nil when there is none.
func (e *Engine) startMasks(plan *scheduler.Plan) *maskJobs {
	var m *maskJobs
	words := (e.model.VocabSize() + 31) / 32
	for _, it := range plan.Items {
		if s := owner(it.Seq); it.Sample && s.req.Constraint != nil {
			if m == nil {
				m = &maskJobs{}
			}
			buf, _ := maskBufs.Get().(*[]uint32)
			if buf == nil || cap(*buf) < words {
				b := make([]uint32, words)
				buf = &b
			}
			bits := (*buf)[:words]
			clear(bits)
			m.jobs = append(m.jobs, maskJob{s: s, buf: buf, bits: bits})
		}
	}
	if m == nil {
		return nil
	}
	m.wg.Add(len(m.jobs))
	for i := range m.jobs {
		go func(j *maskJob) {
			defer m.wg.Done()
			// A panic off the loop goroutine would take the process down:
			// it ends only this sequence, like a Mask error (fault.go).
			defer func() {
				if r := recover(); r != nil {
					j.err = panicError("constraint mask", r)
				}
			}()
			j.err = j.s.req.Constraint.Mask(j.bits)
		}(&m.jobs[i])
	}
	return m
}

// wait joins the mask computations; after it the loop owns every constraint
// again (Commit, or the sequence's end) and may read the masks.
func (m *maskJobs) wait() {
	if m != nil {
		m.wg.Wait()
	}
}

// release returns the bitsets for reuse; the masks are not read after it.
func (m *maskJobs) release() {
	if m == nil {
		return
	}
	for _, j := range m.jobs {
		maskBufs.Put(j.buf)
	}
}

// apply sets the logits of tokens s may not sample to -Inf, so every
// sampler (greedy, top-k/p, penalties) picks among the allowed ones only.
func (m *maskJobs) apply(s *Sequence, logits []float32) error {
	if m == nil || s.req.Constraint == nil {
		return nil
	}
	i := slices.IndexFunc(m.jobs, func(j maskJob) bool { return j.s == s })
	if i < 0 {
		return fmt.Errorf("engine: no constraint mask computed for sequence %d", s.ID())
	}
	j := &m.jobs[i]
	if j.err != nil {
		return fmt.Errorf("engine: constraint mask: %w", j.err)
	}
	ninf := float32(math.Inf(-1))
	for w, word := range j.bits {
		if word == math.MaxUint32 {
			continue
		}
		base := w * 32
		for b := range min(32, len(logits)-base) {
			if word>>b&1 == 0 {
				logits[base+b] = ninf
			}
		}
	}
	return nil
}

// commit advances s's constraint by tok, unless tok ends the sequence.
func (e *Engine) commitConstraint(s *Sequence, tok int32) error {
	c := s.req.Constraint
	if c == nil || slices.Contains(e.cfg.EOG, tok) || slices.Contains(s.req.StopTokens, tok) {
		return nil
	}
	if err := c.Commit(tok); err != nil {
		return fmt.Errorf("engine: constraint commit: %w", err)
	}
	return nil
}
