package stream_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// lpEngine delivers a fixed list of tokens at once, each with a logprob
// equal to minus its index, then ends with a stop.
type lpEngine struct{ ids []int32 }

type lpSeq struct {
	ch  chan engine.Token
	adm chan struct{}
}

func (e lpEngine) Submit(_ context.Context, _ engine.Request) (stream.Sequence, error) {
	s := &lpSeq{ch: make(chan engine.Token, len(e.ids)), adm: make(chan struct{})}
	close(s.adm)
	for i, id := range e.ids {
		s.ch <- engine.Token{ID: id, Index: i, Logprob: &engine.Logprob{Logprob: -float32(i)}}
	}
	close(s.ch)
	return s, nil
}
func (lpEngine) MaxSequenceLen() int         { return 1 << 20 }
func (s *lpSeq) Tokens() <-chan engine.Token { return s.ch }
func (s *lpSeq) Admitted() <-chan struct{}   { return s.adm }
func (s *lpSeq) Progress() <-chan struct{}   { return nil }
func (s *lpSeq) Result() engine.Result       { return engine.Result{Finish: engine.FinishStop} }
func (s *lpSeq) Abort(engine.AbortCause)     {}

// lpRecorder checks Pump's contract: each Logprobs call comes just before
// the Text whose ids it covers, one entry per id.
type lpRecorder struct {
	t       *testing.T
	pending []engine.Logprob
	ids     []int32
	lps     []float32
}

func (r *lpRecorder) Logprobs(lps []engine.Logprob) { r.pending = append(r.pending[:0], lps...) }
func (r *lpRecorder) Text(_ string, ids []int32) error {
	if len(r.pending) != len(ids) {
		r.t.Errorf("Text with %d ids after %d logprobs", len(ids), len(r.pending))
	}
	for _, lp := range r.pending {
		r.lps = append(r.lps, lp.Logprob)
	}
	r.ids = append(r.ids, ids...)
	r.pending = r.pending[:0]
	return nil
}
func (r *lpRecorder) KeepAlive() error { return nil }
func (r *lpRecorder) Flush() error     { return nil }

// TestPumpCarriesLogprobs: every consumed token's logprob reaches the
// emitter with its id, none after a stop string.
func TestPumpCarriesLogprobs(t *testing.T) {
	v := streamtest.NewPieceVocab()
	ids := v.IDs("a", "b", "STOP", "c")
	gen, err := stream.Submit(t.Context(), lpEngine{ids}, engine.Request{}, true)
	if err != nil {
		t.Fatal(err)
	}
	rec := &lpRecorder{t: t}
	stream.Pump(gen, stream.NewTextStream(v.NewDetokenizer(), []string{"STOP"}), rec, stream.PumpConfig{}, nil)
	if len(rec.ids) != 3 || len(rec.lps) != 3 || rec.lps[0] != 0 || rec.lps[1] != -1 || rec.lps[2] != -2 {
		t.Errorf("ids %v logprobs %v, want the 3 tokens up to the stop string", rec.ids, rec.lps)
	}
}
