package stream

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// PumpConfig holds the stream writer's timing rules.
type PumpConfig struct {
	FlushInterval time.Duration // 0: send each token's text at once
	KeepAlive     time.Duration // 0: none
	// StallTimeout aborts a sequence that has waited this long without
	// service since its admission: no token, no prompt chunk computed, and
	// no step working on it (0: none). Time in the engine's queue does not
	// count: a full server is not a stuck generation, and the queue is
	// bounded already (MaxQueue refuses beyond it, the scheduler's aging
	// admits every queued sequence in turn, a client that gives up
	// disconnects and so aborts). Time inside a step that includes the
	// sequence does not count either (when the Sequence is a StepCounter):
	// a prompt chunk that takes longer than the window on a slow or busy
	// machine is work, and the clock restarts when the step ends. A
	// preempted sequence's wait for readmission, or a loop stepping other
	// sequences or nothing, does count: that is a pause of a running
	// generation, which this timeout exists to bound.
	StallTimeout time.Duration
}

// StepCounter is a Sequence that says when the engine is working on it
// (*engine.Sequence is one: see its Steps); found by type assertion. The
// count is odd while a step that includes the sequence runs, and each step
// sends its token or progress signal before its count turns even. Without
// it the stall clock runs from the last token or progress signal alone.
type StepCounter interface {
	Steps() uint64
}

// Outcome is how a pumped stream ended.
type Outcome struct {
	Result engine.Result
	// Finish is the OpenAI finish_reason ("stop", "length") when the
	// generation ended normally, "" otherwise.
	Finish string
	// Err is the in-band error to report (stall, shutdown, engine failure).
	Err error
	// ClientGone: the client left (context done or a failed write). When
	// CutShort is also true the generation was aborted before its end and may
	// be resumed.
	ClientGone bool
	CutShort   bool
	// ReasoningTokens of the output were the model's reasoning
	// (ReasonStream.End sets it).
	ReasoningTokens int
}

// Pump drains g's sequence through ts into em until the sequence ends. A
// client that leaves (g's context done) or a write that fails (Pump then
// cancels g's context) is left to the engine, which watches that context;
// Pump aborts only for what it alone sees: a stop string, a stall, shutdown
// closing. It never returns before the token channel is closed, so the
// sequence's blocks are free (or, when Submit hid the cancellation, its
// generation complete) when it returns.
func Pump(g *Generation, ts *TextStream, em Emitter, cfg PumpConfig, shutdown <-chan struct{}) Outcome {
	p := pump{writer: writer{em: em, cfg: cfg}, gen: g, ts: ts}
	return p.run(shutdown)
}

type pump struct {
	writer
	gen     *Generation
	ts      *TextStream
	ids     []int32          // tokens consumed since the last Text
	lps     []engine.Logprob // their logprobs, when the request asked
	out     Outcome
	aborted bool
}

func (p *pump) run(shutdown <-chan struct{}) Outcome {
	p.flushText = p.emit
	p.leave = func() { p.gen.cancel(errClientGone) } // the engine watches the context and aborts
	seq := p.gen.Seq
	var steps func() uint64
	if sc, ok := seq.(StepCounter); ok {
		steps = sc.Steps
	}
	drain(&p.writer, seq.Tokens(), p.take, loopEvents{
		admitted: seq.Admitted(), progress: seq.Progress(), steps: steps, done: p.gen.ctx.Done(), shutdown: shutdown,
		stall: func() {
			p.abort(engine.CauseStall, fmt.Errorf("%w: no progress for %v", ErrStall, p.cfg.StallTimeout))
		},
		shutdownNow: func() { p.abort(engine.CauseShutdown, ErrShutdown) },
		clientDone:  func() { p.gone = true }, // the engine saw it too, and aborts
	})
	return p.finish()
}

// writer is what Pump and PumpText share: the emitter, the timing rules,
// the text waiting for the flush timer, and whether the client is gone.
type writer struct {
	em        Emitter
	cfg       PumpConfig
	pending   []byte
	gone      bool   // the client left (context done or a failed write)
	keep      *timer // the keep-alive clock, reset by every write
	flushText func() // hands pending to the emitter (with the source's extras)
	leave     func() // a write failed: stop the producer
}

// loopEvents are the loop's inputs besides its items, and what each does.
type loopEvents struct {
	// admitted and progress are the engine's (nil for a text source): the
	// stall clock starts at admission and prompt progress resets it. With
	// admitted nil the clock runs from the start.
	admitted, progress <-chan struct{}
	// steps is the sequence's StepCounter (nil: none): the stall clock does
	// not fire while a step is working on the sequence.
	steps          func() uint64
	done, shutdown <-chan struct{}
	stall          func() // the stall timeout fired
	shutdownNow    func() // shutdown closed
	clientDone     func() // done closed: the client left
}

// drain is the one stream-writer loop, over tokens (Pump) or upstream
// events (PumpText): it feeds items to take until the channel closes, and
// runs the coalescing, keep-alive and stall clocks between them.
func drain[T any](w *writer, items <-chan T, take func(T), ev loopEvents) {
	w.keep = newTimer(w.cfg.KeepAlive)
	stall, flush := &stallClock{timer: newTimer(0), d: w.cfg.StallTimeout, steps: ev.steps}, newTimer(0)
	if ev.admitted == nil {
		stall.arm()
	}
	defer w.keep.Stop()
	defer stall.Stop()
	defer flush.Stop()
	for items != nil {
		select {
		case <-ev.admitted:
			ev.admitted = nil
			stall.arm()
		case <-ev.progress:
			if ev.admitted == nil {
				stall.arm()
			}
		case it, ok := <-items:
			if !ok {
				items = nil
				break
			}
			take(it)
			if !takeReady(items, take) {
				items = nil
			}
			stall.arm()
			if w.cfg.FlushInterval == 0 {
				w.send()
			} else if len(w.pending) > 0 && !flush.armed {
				flush.reset(w.cfg.FlushInterval)
			}
		case <-flush.C():
			flush.armed = false
			w.send()
		case <-w.keep.C():
			w.keep.armed = false
			if !w.gone {
				w.fail(w.em.KeepAlive())
				w.fail(w.em.Flush())
			}
			w.keep.reset(w.cfg.KeepAlive)
		case <-stall.C():
			stall.armed = false
			if stall.served(len(items) > 0, ev.progress) {
				stall.arm()
				break
			}
			ev.stall()
		case <-ev.shutdown:
			ev.shutdown = nil
			ev.shutdownNow()
		case <-ev.done:
			ev.done = nil
			ev.clientDone()
		}
	}
}

// send hands pending text to the emitter and flushes it.
func (w *writer) send() {
	if len(w.pending) == 0 {
		return
	}
	w.flushText()
	if !w.gone {
		w.fail(w.em.Flush())
		w.keep.reset(w.cfg.KeepAlive)
	}
}

// fail records a write error: the client is gone, and so is its producer.
func (w *writer) fail(err error) {
	if err != nil && !w.gone {
		w.gone = true
		w.leave()
	}
}

// takeReady passes take every value already waiting on ch, so a reader that
// fell behind (tokens from the engine, events from an upstream) catches up in
// one write. It returns false when ch closed.
func takeReady[T any](ch <-chan T, take func(T)) bool {
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return false
			}
			take(v)
		default:
			return true
		}
	}
}

// take feeds one token to the TextStream. Tokens after a stop string are
// discarded; they were produced before the engine saw the abort.
func (p *pump) take(tok engine.Token) {
	if p.ts.Stopped() {
		return
	}
	text, stopped := p.ts.Push(tok.ID)
	p.pending = append(p.pending, text...)
	p.ids = append(p.ids, tok.ID)
	if tok.Logprob != nil {
		p.lps = append(p.lps, *tok.Logprob)
	}
	if stopped {
		p.out.Finish = "stop"
		p.abortSeq(engine.CauseStopString)
	}
}

func (p *pump) emit() {
	if le, ok := p.em.(LogprobEmitter); ok && len(p.lps) > 0 {
		le.Logprobs(p.lps)
	}
	p.fail(p.em.Text(string(p.pending), p.ids))
	p.pending, p.ids, p.lps = p.pending[:0], p.ids[:0], p.lps[:0]
}

func (p *pump) abort(cause engine.AbortCause, err error) {
	if p.out.Err == nil && p.out.Finish == "" && !p.gone {
		p.out.Err = err
	}
	p.abortSeq(cause)
}

func (p *pump) abortSeq(cause engine.AbortCause) {
	if !p.aborted {
		p.aborted = true
		p.gen.Seq.Abort(cause)
	}
}

// finish runs after the token channel closed: the last text goes out and the
// engine's result decides the outcome.
func (p *pump) finish() Outcome {
	p.out.ClientGone = p.gone
	p.out.Result = p.gen.Seq.Result()
	res := p.out.Result
	switch {
	case p.out.Finish != "" || p.out.Err != nil:
		// decided by the writer (stop string, stall, shutdown)
	case res.Finish == engine.FinishStop:
		p.out.Finish = "stop"
	case res.Finish == engine.FinishLength:
		p.out.Finish = "length"
	case res.Finish == engine.FinishError:
		p.out.Err = fmt.Errorf("generation failed: %w", res.Err)
	case res.Finish == engine.FinishAbort && res.Cause == engine.CauseShutdown:
		p.out.Err = ErrShutdown
	case res.Finish == engine.FinishAbort && (p.out.ClientGone || res.Cause == engine.CauseClientDisconnect):
		// The engine may see the context end before this loop does.
		p.out.ClientGone, p.out.CutShort = true, true
	default:
		p.out.Err = fmt.Errorf("generation aborted (%s)", res.Cause)
	}
	if p.out.Finish != "" {
		p.pending = append(p.pending, p.ts.Finish()...)
	}
	if len(p.pending) > 0 || len(p.ids) > 0 {
		p.emit()
	}
	p.out.ClientGone = p.out.ClientGone || p.gone // the last write may have failed
	return p.out
}

// stallClock is the stall timer and what it needs to tell a stall from a
// long step: the sequence's step count when it was last armed.
type stallClock struct {
	*timer
	d     time.Duration
	steps func() uint64 // nil: the source has no StepCounter
	seen  uint64        // steps() at the last arm, rounded up to even
}

// arm restarts the window. A step in flight now (odd count) is counted as
// already ended: its token or progress signal, which it sends before its
// count turns even, is what restarts the clock, not the count's change.
func (c *stallClock) arm() {
	c.reset(c.d)
	if c.steps != nil {
		c.seen = (c.steps() + 1) &^ 1
	}
}

// served reports, when the window has run out, whether the sequence was in
// fact served: a step is working on it now, one ran since the last arm, or
// what a step delivered waits unread (the timer and the delivery can be
// ready at once, and select picks either). It takes a waiting progress
// signal, which says no more than the re-arm does.
func (c *stallClock) served(itemWaiting bool, progress <-chan struct{}) bool {
	if itemWaiting {
		return true
	}
	select {
	case <-progress:
		return true
	default:
	}
	return c.steps != nil && c.steps() != c.seen
}

// timer is a time.Timer that may be off (d == 0) and knows whether it is armed.
type timer struct {
	t     *time.Timer
	armed bool
}

func newTimer(d time.Duration) *timer {
	t := &timer{t: time.NewTimer(time.Hour)}
	t.t.Stop()
	t.reset(d)
	return t
}

func (t *timer) reset(d time.Duration) {
	if d <= 0 {
		return
	}
	t.t.Reset(d)
	t.armed = true
}

// C is nil (blocks forever) while the timer is not armed.
func (t *timer) C() <-chan time.Time {
	if !t.armed {
		return nil
	}
	return t.t.C
}

func (t *timer) Stop() { t.t.Stop() }
