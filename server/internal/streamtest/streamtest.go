// Package streamtest holds the fakes the stream core's and the HTTP
// adapter's tests share: a tokenizer of arbitrary pieces and an engine whose
// timing a test controls (under testing/synctest).
package streamtest

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// PieceVocab is a test tokenizer whose tokens are arbitrary byte strings:
// ids 0-255 are single bytes (prompts are encoded byte by byte) and the
// pieces a test adds get ids from 256. Its decoder holds back incomplete
// UTF-8, like the real one; it has no merges that could change earlier text.
type PieceVocab struct{ pieces []string }

// NewPieceVocab returns a vocabulary of the 256 single bytes.
func NewPieceVocab() *PieceVocab {
	v := &PieceVocab{}
	for b := range 256 {
		v.pieces = append(v.pieces, string([]byte{byte(b)}))
	}
	return v
}

// IDs adds pieces to the vocabulary and returns their ids.
func (v *PieceVocab) IDs(pieces ...string) []int32 {
	out := make([]int32, len(pieces))
	for i, p := range pieces {
		out[i] = int32(len(v.pieces))
		v.pieces = append(v.pieces, p)
	}
	return out
}

func (v *PieceVocab) Encode(text string, _ bool) ([]int32, error) {
	out := make([]int32, len(text))
	for i := range len(text) {
		out[i] = int32(text[i])
	}
	return out, nil
}

func (v *PieceVocab) ChatPrompt(msgs []stream.ChatMessage) (string, error) {
	var s string
	for _, m := range msgs {
		s += "<" + m.Role + ">" + m.Content + "\n"
	}
	return s + "<assistant>", nil
}

func (v *PieceVocab) NewDetokenizer() stream.Detokenizer { return &pieceDecoder{v: v} }

type pieceDecoder struct {
	v       *PieceVocab
	pending []byte
}

func (d *pieceDecoder) Add(id int32) string {
	d.pending = append(d.pending, d.v.pieces[id]...)
	n := 0
	for n < len(d.pending) && utf8.FullRune(d.pending[n:]) {
		_, size := utf8.DecodeRune(d.pending[n:])
		n += size
	}
	out := string(d.pending[:n])
	d.pending = d.pending[n:]
	return out
}

// Flush renders an incomplete character as U+FFFD, as the real decoder does.
func (d *pieceDecoder) Flush() string {
	out := strings.ToValidUTF8(string(d.pending), "\uFFFD")
	d.pending = nil
	return out
}

// ScriptEngine stands in for the engine where a test must control time:
// every sequence is admitted after a queueing delay and produces the same
// scripted ids, the first after a prefill delay, then one per interval. It
// keeps the engine's contract: the channel is closed exactly once, Admitted
// is closed on admission only, Abort and ctx cancellation end the sequence,
// Resume continues the script after the tokens already produced.
type ScriptEngine struct {
	Script   []int32
	Queued   time.Duration // before admission
	Prefill  time.Duration // from admission to the first token
	Interval time.Duration // between tokens
	Finish   engine.FinishReason
	Fail     error             // Submit returns it (backpressure, shutdown)
	Cause    engine.AbortCause // with Finish FinishAbort: the script ends as if aborted

	mu       sync.Mutex
	live     int // sequences whose channel is not closed yet
	produced int // tokens sent by all sequences
	submits  []engine.Request
	aborts   []engine.AbortCause
}

func (e *ScriptEngine) Submit(ctx context.Context, req engine.Request) (stream.Sequence, error) {
	if e.Fail != nil {
		return nil, e.Fail
	}
	e.mu.Lock()
	e.live++
	e.submits = append(e.submits, req)
	e.mu.Unlock()
	s := &scriptSeq{e: e, ch: make(chan engine.Token, len(e.Script)+1), admitted: make(chan struct{}),
		abort: make(chan engine.AbortCause, 1)}
	go s.run(ctx, len(req.Resume))
	return s, nil
}

// MaxSequenceLen is no limit: the Backend's ContextLen is the one tests set.
func (e *ScriptEngine) MaxSequenceLen() int { return 1 << 20 }

// Live counts the sequences whose channel is not closed yet.
func (e *ScriptEngine) Live() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live
}

// Produced counts the tokens all sequences sent.
func (e *ScriptEngine) Produced() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.produced
}

// Submits are the requests accepted, in order.
func (e *ScriptEngine) Submits() []engine.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Request(nil), e.submits...)
}

// Aborts are the causes of the sequences that ended aborted, in order.
func (e *ScriptEngine) Aborts() []engine.AbortCause {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.AbortCause(nil), e.aborts...)
}

type scriptSeq struct {
	e        *ScriptEngine
	ch       chan engine.Token
	admitted chan struct{}
	abort    chan engine.AbortCause
	once     sync.Once
	res      engine.Result
}

func (s *scriptSeq) run(ctx context.Context, from int) {
	defer func() {
		s.e.mu.Lock()
		s.e.live--
		if s.res.Finish == engine.FinishAbort {
			s.e.aborts = append(s.e.aborts, s.res.Cause)
		}
		s.e.mu.Unlock()
		close(s.ch)
	}()
	// sleep waits d unless the sequence is aborted first, with i tokens out.
	sleep := func(d time.Duration, i int) bool {
		select {
		case <-time.After(d):
			return true
		case c := <-s.abort:
			s.res = engine.Result{Finish: engine.FinishAbort, Cause: c, CompletionTokens: i}
		case <-ctx.Done():
			s.res = engine.Result{Finish: engine.FinishAbort, Cause: engine.CauseClientDisconnect, CompletionTokens: i}
		}
		return false
	}
	queued, prefill := s.e.Queued, s.e.Prefill
	if from > 0 { // a resumed generation continues at once
		queued, prefill = 0, 0
	}
	if !sleep(queued, from) {
		return
	}
	close(s.admitted)
	for i := from; i < len(s.e.Script); i++ {
		wait := s.e.Interval
		if i == from {
			wait = prefill
		}
		if !sleep(wait, i) {
			return
		}
		s.ch <- engine.Token{ID: s.e.Script[i], Index: i}
		s.e.mu.Lock()
		s.e.produced++
		s.e.mu.Unlock()
	}
	s.res = engine.Result{Finish: s.e.Finish, Cause: s.e.Cause, CompletionTokens: len(s.e.Script)}
	if s.res.Finish == "" {
		s.res.Finish = engine.FinishStop
	}
}

func (s *scriptSeq) Tokens() <-chan engine.Token { return s.ch }
func (s *scriptSeq) Admitted() <-chan struct{}   { return s.admitted }
func (s *scriptSeq) Progress() <-chan struct{}   { return nil } // a prefill is one silent wait
func (s *scriptSeq) Result() engine.Result       { return s.res }
func (s *scriptSeq) Abort(c engine.AbortCause) {
	s.once.Do(func() { s.abort <- c })
}
