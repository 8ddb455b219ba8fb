package server

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/engine"
)

// pieceVocab is a test tokenizer whose tokens are arbitrary byte strings:
// ids 0-255 are single bytes (prompts are encoded byte by byte) and the
// pieces a test adds get ids from 256. Its decoder holds back incomplete
// UTF-8, like the real one; it has no merges that could change earlier text.
type pieceVocab struct{ pieces []string }

func newPieceVocab() *pieceVocab {
	v := &pieceVocab{}
	for b := range 256 {
		v.pieces = append(v.pieces, string([]byte{byte(b)}))
	}
	return v
}

// ids adds pieces to the vocabulary and returns their ids.
func (v *pieceVocab) ids(pieces ...string) []int32 {
	out := make([]int32, len(pieces))
	for i, p := range pieces {
		out[i] = int32(len(v.pieces))
		v.pieces = append(v.pieces, p)
	}
	return out
}

func (v *pieceVocab) Encode(text string, _ bool) ([]int32, error) {
	out := make([]int32, len(text))
	for i := range len(text) {
		out[i] = int32(text[i])
	}
	return out, nil
}

func (v *pieceVocab) ChatPrompt(msgs []ChatMessage) (string, error) {
	var s string
	for _, m := range msgs {
		s += "<" + m.Role + ">" + m.Content + "\n"
	}
	return s + "<assistant>", nil
}

func (v *pieceVocab) NewDetokenizer() Detokenizer { return &pieceDecoder{v: v} }

type pieceDecoder struct {
	v       *pieceVocab
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

// scriptEngine stands in for the engine where a test must control time:
// every sequence is admitted after a queueing delay and produces the same
// scripted ids, the first after a prefill delay, then one per interval. It
// keeps the engine's contract: the channel is closed exactly once, Admitted
// is closed on admission only, Abort and ctx cancellation end the sequence,
// Resume continues the script after the tokens already produced.
type scriptEngine struct {
	script   []int32
	queued   time.Duration // before admission
	prefill  time.Duration // from admission to the first token
	interval time.Duration // between tokens
	finish   engine.FinishReason
	fail     error             // Submit returns it (backpressure, shutdown)
	cause    engine.AbortCause // with finish FinishAbort: the script ends as if aborted

	mu       sync.Mutex
	live     int // sequences whose channel is not closed yet
	produced int // tokens sent by all sequences
	submits  []engine.Request
	aborts   []engine.AbortCause
}

func (e *scriptEngine) Submit(ctx context.Context, req engine.Request) (Sequence, error) {
	if e.fail != nil {
		return nil, e.fail
	}
	e.mu.Lock()
	e.live++
	e.submits = append(e.submits, req)
	e.mu.Unlock()
	s := &scriptSeq{e: e, ch: make(chan engine.Token, len(e.script)+1), admitted: make(chan struct{}),
		abort: make(chan engine.AbortCause, 1)}
	go s.run(ctx, len(req.Resume))
	return s, nil
}

func (e *scriptEngine) Live() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live
}

func (e *scriptEngine) Produced() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.produced
}

func (e *scriptEngine) Submits() []engine.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Request(nil), e.submits...)
}

func (e *scriptEngine) Aborts() []engine.AbortCause {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.AbortCause(nil), e.aborts...)
}

type scriptSeq struct {
	e        *scriptEngine
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
	queued, prefill := s.e.queued, s.e.prefill
	if from > 0 { // a resumed generation continues at once
		queued, prefill = 0, 0
	}
	if !sleep(queued, from) {
		return
	}
	close(s.admitted)
	for i := from; i < len(s.e.script); i++ {
		wait := s.e.interval
		if i == from {
			wait = prefill
		}
		if !sleep(wait, i) {
			return
		}
		s.ch <- engine.Token{ID: s.e.script[i], Index: i}
		s.e.mu.Lock()
		s.e.produced++
		s.e.mu.Unlock()
	}
	s.res = engine.Result{Finish: s.e.finish, Cause: s.e.cause, CompletionTokens: len(s.e.script)}
	if s.res.Finish == "" {
		s.res.Finish = engine.FinishStop
	}
}

func (s *scriptSeq) Tokens() <-chan engine.Token { return s.ch }
func (s *scriptSeq) Admitted() <-chan struct{}   { return s.admitted }
func (s *scriptSeq) Result() engine.Result       { return s.res }
func (s *scriptSeq) Abort(c engine.AbortCause) {
	s.once.Do(func() { s.abort <- c })
}
