package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

func TestSubmitValidation(t *testing.T) {
	m := newHashModel(64, 100, 8, 16) // limit: min(100, 128) = 100
	e := newTestEngine(t, m, Config{})
	ok := prompt(10, 1, 64)
	for _, tc := range []struct {
		name string
		req  Request
		want error
	}{
		{"empty prompt", Request{}, ErrInvalidRequest},
		{"token outside vocab", Request{Prompt: []int32{1, 64}}, ErrInvalidRequest},
		{"negative token", Request{Prompt: []int32{-1}}, ErrInvalidRequest},
		{"stop token outside vocab", Request{Prompt: ok, StopTokens: []int32{99}}, ErrInvalidRequest},
		{"negative max tokens", Request{Prompt: ok, MaxTokens: -1}, ErrInvalidRequest},
		{"resume uses up max tokens", Request{Prompt: ok, MaxTokens: 2, Resume: []int32{1, 2}}, ErrInvalidRequest},
		{"bad sampling", Request{Prompt: ok, Sampling: SamplingParams{TopP: 2}}, ErrInvalidRequest},
		{"prompt fills the context", Request{Prompt: prompt(100, 1, 64)}, ErrPromptTooLong},
		{"prompt + max tokens over the context", Request{Prompt: ok, MaxTokens: 91}, ErrPromptTooLong},
		{"prompt + max tokens at the context", Request{Prompt: ok, MaxTokens: 90}, nil},
		{"max tokens 0 means up to the context", Request{Prompt: prompt(99, 1, 64)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := e.Submit(bg, tc.req)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if s != nil {
				s.Abort(CauseStopString)
				s.Result()
			}
		})
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := e.Submit(ctx, Request{Prompt: ok}); !errors.Is(err, context.Canceled) {
		t.Fatalf("submit with a cancelled context: %v", err)
	}
}

// firstFresh is the first index k of out whose token did not occur before it.
func firstFresh(out []int32, from int) int {
	for k := from; k < len(out); k++ {
		if !slices.Contains(out[:k], out[k]) {
			return k
		}
	}
	return -1
}

func TestFinishReasons(t *testing.T) {
	m := newHashModel(64, 64, 16, 16)
	p := prompt(20, 3, 64)
	ref := m.reference(p, 44) // up to the context limit of 64
	k := firstFresh(ref, 3)
	for _, tc := range []struct {
		name string
		cfg  Config
		req  Request
		want []int32
		res  Result
	}{
		{"max tokens", Config{}, Request{Prompt: p, MaxTokens: 5}, ref[:5],
			Result{Finish: FinishLength, PromptTokens: 20, CompletionTokens: 5}},
		{"context limit", Config{}, Request{Prompt: p}, ref,
			Result{Finish: FinishLength, PromptTokens: 20, CompletionTokens: 44}},
		{"end-of-generation id", Config{EOG: []int32{ref[k]}}, Request{Prompt: p}, ref[:k],
			Result{Finish: FinishStop, PromptTokens: 20, CompletionTokens: k + 1}},
		{"request stop token", Config{}, Request{Prompt: p, StopTokens: []int32{ref[k]}}, ref[:k],
			Result{Finish: FinishStop, PromptTokens: 20, CompletionTokens: k + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, newHashModel(64, 64, 16, 16), tc.cfg)
			got, r := collect(t, submit(t, e, tc.req), 0)
			if !slices.Equal(got, tc.want) || r != tc.res {
				t.Fatalf("got %v %+v\nwant %v %+v", got, r, tc.want, tc.res)
			}
		})
	}
}

// A failing forward fails the sequences of that batch only; a queued one and
// later ones run normally.
func TestForwardErrorFailsOnlyItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 64, 16)
		e := newTestEngine(t, m, Config{MaxSeqs: 2})
		boom := errors.New("device lost")
		fail := true
		first, resume := make(chan struct{}), make(chan struct{})
		m.onForward = func(b *kernels.Batch) error {
			if m.forwards == 1 { // hold a's first step until b and c are submitted
				first <- struct{}{}
				<-resume
			}
			if fail && len(b.Seqs) == 2 {
				fail = false
				return boom
			}
			return nil
		}
		a := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 50})
		<-first
		b := submit(t, e, Request{Prompt: prompt(6, 2, 64), MaxTokens: 50})
		c := submit(t, e, Request{Prompt: prompt(7, 3, 64), MaxTokens: 5}) // queued: MaxSeqs 2
		resume <- struct{}{}
		for _, s := range []*Sequence{a, b} {
			if r := s.Result(); r.Finish != FinishError || !errors.Is(r.Err, boom) {
				t.Fatalf("seq %d: %+v", s.ID(), r)
			}
		}
		got, r := collect(t, c, 0)
		if r.Finish != FinishLength || !slices.Equal(got, m.reference(prompt(7, 3, 64), 5)) {
			t.Fatalf("queued seq: %v %+v", got, r)
		}
		synctest.Wait()
		if st := e.Stats(); st.KV.Used != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// Backpressure at the edge: with the loop held inside a step, Submit accepts
// MaxQueue sequences and refuses the next with ErrQueueFull.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 64, 16)
		e := newTestEngine(t, m, Config{MaxQueue: 2, MaxSeqs: 1})
		ls := newLockstep(m, e)
		a := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 3})
		ls.next() // a started: it no longer counts against the queue
		b := submit(t, e, Request{Prompt: prompt(5, 2, 64), MaxTokens: 3})
		c := submit(t, e, Request{Prompt: prompt(5, 3, 64), MaxTokens: 3})
		if _, err := e.Submit(bg, Request{Prompt: prompt(5, 4, 64)}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("third queued submit: %v", err)
		}
		ls.release()
		defer ls.freeRun()()
		for _, s := range []*Sequence{a, b, c} {
			if r := s.Result(); r.Finish != FinishLength {
				t.Fatalf("%+v", r)
			}
		}
		d := submit(t, e, Request{Prompt: prompt(5, 4, 64), MaxTokens: 3}) // room again
		if r := d.Result(); r.Finish != FinishLength {
			t.Fatalf("%+v", r)
		}
	})
}

// Close ends running and queued sequences with CauseShutdown, then refuses work.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 64, 16)
		e := newTestEngine(t, m, Config{MaxSeqs: 1})
		ls := newLockstep(m, e)
		a := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 100})
		ls.next()
		b := submit(t, e, Request{Prompt: prompt(5, 2, 64), MaxTokens: 100})
		closed := make(chan error)
		go func() { closed <- e.Close(bg) }()
		synctest.Wait() // Close is waiting for the loop, parked in Forward
		if _, err := e.Submit(bg, Request{Prompt: prompt(5, 3, 64)}); !errors.Is(err, ErrClosed) {
			t.Fatalf("submit during close: %v", err)
		}
		ls.release()
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		for _, s := range []*Sequence{a, b} {
			if r := s.Result(); r.Finish != FinishAbort || r.Cause != CauseShutdown {
				t.Fatalf("seq %d: %+v", s.ID(), r)
			}
		}
		if err := e.Close(bg); err != nil {
			t.Fatalf("second close: %v", err)
		}
		a.Abort(CauseStall) // after the end: a no-op that must not block
	})
}

// Resume continues an interrupted generation: output indices continue and
// penalties see the resumed tokens, so greedy output with a strong presence
// penalty equals the uninterrupted run's tail.
func TestResume(t *testing.T) {
	m := newHashModel(64, 1024, 64, 16)
	e := newTestEngine(t, m, Config{})
	p := prompt(12, 5, 64)
	sp := SamplingParams{PresencePenalty: 4, PenaltyLastN: -1}
	full, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 30, Sampling: sp}), 0)
	if slices.Equal(full, m.reference(p, 30)) {
		t.Fatal("the penalty does not change the output: the test would prove nothing")
	}
	rest, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 30, Sampling: sp, Resume: full[:9]}), 9)
	if !slices.Equal(rest, full[9:]) {
		t.Fatalf("resumed %v, want %v", rest, full[9:])
	}
	if r.Finish != FinishLength || r.CompletionTokens != 30 || r.PromptTokens != 12 {
		t.Fatalf("%+v", r)
	}
}

// A seeded generation cut after k tokens and resumed (same prompt and seed,
// Resume = those k tokens) continues exactly as the uninterrupted one: the
// sampler's PRNG is advanced over the resumed tokens, one draw per token at a
// positive temperature and none when greedy.
func TestSeededResumeEqualsUninterrupted(t *testing.T) {
	m := newHashModel(64, 1024, 64, 16)
	e := newTestEngine(t, m, Config{})
	p := prompt(12, 7, 64)
	for _, tc := range []struct {
		name string
		sp   SamplingParams
	}{
		{"greedy", SamplingParams{Seed: seed(42)}},
		{"greedy with penalties", SamplingParams{RepetitionPenalty: 1.3, PresencePenalty: 1, Seed: seed(42)}},
		{"temperature and top-p", SamplingParams{Temperature: 0.9, TopP: 0.95, Seed: seed(42)}},
		{"top-k, min-p and penalties", SamplingParams{Temperature: 1.2, TopK: 20, MinP: 0.05, FrequencyPenalty: 0.5, Seed: seed(7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 30
			full, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n, Sampling: tc.sp}), 0)
			if len(full) != n {
				t.Fatalf("uninterrupted run gave %d tokens", len(full))
			}
			for _, k := range []int{1, 8, n - 1} {
				rest, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n, Sampling: tc.sp, Resume: full[:k]}), k)
				if !slices.Equal(rest, full[k:]) {
					t.Fatalf("resumed after %d tokens: %v\nuninterrupted:         %v", k, rest, full[k:])
				}
				if r.Finish != FinishLength || r.CompletionTokens != n {
					t.Fatalf("resumed after %d tokens: %+v", k, r)
				}
			}
		})
	}
}

// The same seed and prompt give the same sampled output, also when the two
// run in one batch; another seed gives another output.
func TestSeededSampling(t *testing.T) {
	m := newHashModel(64, 1024, 64, 16)
	e := newTestEngine(t, m, Config{})
	p := prompt(9, 6, 64)
	req := func(sd uint64) Request {
		return Request{Prompt: p, MaxTokens: 40, Sampling: SamplingParams{Temperature: 1.5, TopK: 20, Seed: seed(sd)}}
	}
	s1, s2, s3 := submit(t, e, req(1)), submit(t, e, req(1)), submit(t, e, req(2))
	o1, _ := collect(t, s1, 0)
	o2, _ := collect(t, s2, 0)
	o3, _ := collect(t, s3, 0)
	if !slices.Equal(o1, o2) || slices.Equal(o1, o3) {
		t.Fatalf("seed 1: %v / %v; seed 2: %v", o1, o2, o3)
	}
}

type recordingObserver struct {
	first, tokens, steps, rows int
	finished                   []Result
	reclaims                   []time.Duration
}

func (o *recordingObserver) OnFirstToken(*Sequence, time.Time) { o.first++ }
func (o *recordingObserver) OnToken(*Sequence, time.Time)      { o.tokens++ }
func (o *recordingObserver) OnFinish(_ *Sequence, r Result, _ time.Duration) {
	o.finished = append(o.finished, r)
}
func (o *recordingObserver) OnReclaim(d time.Duration)        { o.reclaims = append(o.reclaims, d) }
func (o *recordingObserver) OnStep(_ time.Duration, rows int) { o.steps++; o.rows += rows }

func TestObserver(t *testing.T) {
	obs := &recordingObserver{}
	m := newHashModel(64, 1024, 64, 16)
	e := newTestEngine(t, m, Config{Observer: obs})
	ls := newLockstep(m, e)
	stop := ls.freeRun()
	got, _ := collect(t, submit(t, e, Request{Prompt: prompt(10, 1, 64), MaxTokens: 6}), 0)
	stop()
	s := submit(t, e, Request{Prompt: prompt(10, 2, 64), MaxTokens: 500})
	ls.next() // s's first step: abort it before it can run to its length
	s.Abort(CauseStopString)
	ls.release()
	s.Result()
	if err := e.Close(bg); err != nil { // the loop has stopped: obs is ours to read
		t.Fatal(err)
	}
	st := e.Stats()
	switch {
	case len(got) != 6 || obs.first != 2 || obs.tokens+obs.first != int(st.GenTokens):
		t.Fatalf("first %d, tokens %d, generated %d", obs.first, obs.tokens, st.GenTokens)
	case len(obs.finished) != 2 || obs.finished[1].Cause != CauseStopString:
		t.Fatalf("finished %+v", obs.finished)
	case len(obs.reclaims) != 1 || st.Reclaims != 1:
		t.Fatalf("reclaims %v, stats %d", obs.reclaims, st.Reclaims)
	case obs.steps != int(st.Steps) || int64(obs.rows) != st.PromptTokens+st.GenTokens-2:
		// every row is a prompt token or a decode of a sampled token, except
		// each sequence's last sampled token, never decoded
		t.Fatalf("steps %d rows %d, stats %+v", obs.steps, obs.rows, st)
	}
}

// Admitted is closed when a sequence is first scheduled, not at Submit: a
// sequence waiting behind a full batch is not admitted, and one that ends
// while queued never is.
func TestAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 64, 16)
		e := newTestEngine(t, m, Config{MaxSeqs: 1})
		ls := newLockstep(m, e)
		closed := func(ch <-chan struct{}) bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}
		a := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 3})
		ls.next() // inside a's first step
		b := submit(t, e, Request{Prompt: prompt(5, 2, 64), MaxTokens: 3})
		c := submit(t, e, Request{Prompt: prompt(5, 3, 64), MaxTokens: 3})
		c.Abort(CauseClientDisconnect)
		if !closed(a.Admitted()) || closed(b.Admitted()) {
			t.Fatalf("during a's first step: a admitted %v, b admitted %v", closed(a.Admitted()), closed(b.Admitted()))
		}
		for step := 2; step <= 3; step++ { // a decodes its 2nd and 3rd tokens
			ls.release()
			ls.next()
			if closed(b.Admitted()) {
				t.Fatalf("step %d: b admitted while a holds the only slot", step)
			}
		}
		ls.release()
		ls.next() // a has ended: b's first step
		if !closed(a.Done()) || !closed(b.Admitted()) {
			t.Fatalf("step 4: a done %v, b admitted %v", closed(a.Done()), closed(b.Admitted()))
		}
		ls.release()
		defer ls.freeRun()()
		if r := b.Result(); r.Finish != FinishLength || !closed(b.Admitted()) {
			t.Fatalf("b: %+v, admitted %v", r, closed(b.Admitted()))
		}
		if r := c.Result(); r.Cause != CauseClientDisconnect || closed(c.Admitted()) {
			t.Fatalf("c, aborted while queued: %+v, admitted %v", r, closed(c.Admitted()))
		}
	})
}
