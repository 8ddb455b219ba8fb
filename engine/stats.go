package engine

import (
	"time"

	"github.com/sluicehq/sluice/kvcache"
)

// Stats is a snapshot the loop publishes once per step (and after applying
// arrivals or aborts while idle). It is immutable: readers may keep it.
type Stats struct {
	At       time.Time // when it was published
	Steps    int64
	Running  int // sequences admitted (holding KV blocks)
	Waiting  int // sequences queued, including preempted ones
	KV       kvcache.Usage
	KVEvicts int64 // cached blocks evicted for fresh allocations
	// KVWindow is the sliding-window layers' block group (window.go); zero
	// without one.
	KVWindow kvcache.Usage
	// StateSlotBytes is one recurrent-state slot's memory (a hybrid model's
	// per-sequence state, counted in KV.StatesTotal/StatesUsed); 0 without.
	StateSlotBytes int64

	Preemptions     int64
	PrefixHitTokens int64 // tokens served from the prefix cache at admission
	PromptTokens    int64 // tokens prefilled (prompts, resumes, recomputes after preemption)
	GenTokens       int64 // tokens sampled
	Finished        int64 // sequences ended, any reason
	Aborted         int64 // sequences ended by abort
	StepFailures    int64 // steps that failed (their sequences ended with an error); see fault.go

	// DeviceToHost says the tokens are sampled on a device whose backend
	// counts its downloads; DeviceToHostBytes is that count (logits rows
	// read back, token ids, logprobs), since the backend was made. Without
	// a device sampler (the CPU's logits are host memory) both are zero.
	DeviceToHost      bool
	DeviceToHostBytes int64

	// Speculative decoding (spec.go): steps in which a sequence carried
	// drafts, the draft tokens verified (each one row), those accepted, and
	// the fitted cost of a draft row relative to a sequence's share of a
	// decode step (vLLM's spec_decode counters).
	// Speculating says speculation is configured (the counters mean
	// something); SpecMethod is its proposer (SpecConfig.Method: ngram,
	// draft or mtp), whose drafts all the counters count.
	Speculating                                     bool
	SpecMethod                                      string
	SpecDrafts, SpecDraftTokens, SpecAcceptedTokens int64
	SpecRowCost                                     float64

	LastStep      time.Duration // the last step's wall time (schedule → deliver)
	LastBatchRows int           // rows (tokens) in the last step's batch
	LastBatchSeqs int           // sequences in the last step's batch
	BusyTime      time.Duration // total time spent in steps: busy/elapsed is the loop's saturation

	Reclaims      int64         // aborts whose blocks were returned
	ReclaimTotal  time.Duration // summed cancel → blocks-free latency
	ReclaimMax    time.Duration
	LastReclaimAt time.Time
}

// Observer receives events from the engine loop, for metrics. Methods run on
// the loop goroutine between steps and must return quickly: they delay every
// sequence. A Sequence passed in may be read (ID, Request, Submitted) but its
// Tokens channel must not be drained from the callback.
type Observer interface {
	// OnFirstToken: s delivered its first token at (time to first token = at - s.Submitted()).
	OnFirstToken(s *Sequence, at time.Time)
	// OnToken: s delivered a token at (inter-token latency from the previous call).
	OnToken(s *Sequence, at time.Time)
	// OnFinish: s ended with r; queued is the time from Submit to first admission
	// (the whole lifetime if it never started).
	OnFinish(s *Sequence, r Result, queued time.Duration)
	// OnReclaim: an aborted sequence's blocks were back in the pool d after its cancellation.
	OnReclaim(d time.Duration)
	// OnStep: a step took d for rows batch rows (tokens).
	OnStep(d time.Duration, rows int)
}
