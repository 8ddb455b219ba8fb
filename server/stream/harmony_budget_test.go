package stream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// analysisOpener is a harmony template whose prompt opens the analysis
// message (a prefilled reply).
type analysisOpener struct{ *streamtest.PieceVocab }

func (o analysisOpener) ChatPrompt(msgs []ChatMessage) (string, error) {
	p, err := o.PieceVocab.ChatPrompt(msgs)
	return p + "<|start|>assistant<|channel|>analysis<|message|>", err
}

// TestHarmonyBudgetEnforced: the reasoning budget holds gpt-oss's analysis
// message, through the real engine over a model that would reason forever
// (it writes 'x'): once the budget is spent the model is made to write
// <|end|>, and what follows is the answer; the reasoning's tokens are the
// budget and the marker's.
func TestHarmonyBudgetEnforced(t *testing.T) {
	e, err := engine.New(&streamtest.SlowModel{}, engine.Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	mk, _ := ReasoningMarkupFor("harmony")
	b := &Backend{Engine: FromEngine(e), Tokenizer: analysisOpener{streamtest.NewPieceVocab()}, ContextLen: 1024, Reasoning: mk}
	closeLen := len(mk.Close) // the piece vocabulary spells it byte by byte
	for _, budget := range []int{8, 1} {
		g := &GenRequest{}
		if err := g.SetMessages([]ChatMessage{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		if err := g.SetParams(Params{MaxTokens: ptr(40)}); err != nil {
			t.Fatal(err)
		}
		if err := g.SetReasoning(ReasoningAsk{Budget: &budget, BudgetParam: "b"}); err != nil {
			t.Fatal(err)
		}
		req, err := Prepare(b, g)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := b.Submit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		rs := NewReasonStream(b, g, req.Prompt)
		rec := &reasonRec{}
		ts := NewTextStream(NewDetokenizerFor(b.Tokenizer, req.Prompt), nil)
		out := rs.End(Pump(gen, ts, rs.Use(rec, rec), PumpConfig{KeepAlive: time.Minute, StallTimeout: time.Minute}, nil))
		answer := 40 - budget - closeLen
		if out.ReasoningTokens != budget+closeLen || rec.reasoning != strings.Repeat("x", budget) || rec.text != strings.Repeat("x", answer) {
			t.Errorf("budget %d: %d reasoning tokens, reasoning %q, answer %q; want %d tokens, %d x then %d x",
				budget, out.ReasoningTokens, rec.reasoning, rec.text, budget+closeLen, budget, answer)
		}
	}
}
