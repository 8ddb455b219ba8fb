package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// thinkOpener is a template that opens the reasoning itself, as
// DeepSeek-R1's and Qwen3-2507-Thinking's do.
type thinkOpener struct{ *streamtest.PieceVocab }

func (o thinkOpener) ChatPrompt(msgs []ChatMessage) (string, error) {
	p, err := o.PieceVocab.ChatPrompt(msgs)
	return p + "<think>\n", err
}

type reasonRec struct{ reasoning, text string }

func (r *reasonRec) Text(text string, _ []int32) error { r.text += text; return nil }
func (r *reasonRec) Reasoning(text string) error       { r.reasoning += text; return nil }
func (r *reasonRec) KeepAlive() error                  { return nil }
func (r *reasonRec) Flush() error                      { return nil }

// TestReasoningBudgetEnforced, through the real engine over a model that
// would reason forever (it writes 'x' after an opened <think>): with a
// budget the model is made to close its reasoning once the budget is
// spent, so the reasoning takes at most the budget plus the closing
// marker's tokens and the answer follows; without one it never closes.
func TestReasoningBudgetEnforced(t *testing.T) {
	e, err := engine.New(&streamtest.SlowModel{}, engine.Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	mk, _ := ReasoningMarkupFor("think-tags")
	b := &Backend{Engine: FromEngine(e), Tokenizer: thinkOpener{streamtest.NewPieceVocab()}, ContextLen: 1024, Reasoning: mk}
	closeLen := len(mk.Close) // the piece vocabulary spells it byte by byte
	for _, c := range []struct {
		effort *string
		budget *int
		want   int // the reasoning's tokens; 0: all 40
	}{
		{budget: ptr(8), want: 8 + closeLen},
		{effort: ptr("minimal"), want: 0}, // 256 tokens: over max_tokens
		{budget: ptr(1), want: 1 + closeLen},
		{},
	} {
		g := &GenRequest{}
		if err := g.SetMessages([]ChatMessage{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		if err := g.SetParams(Params{MaxTokens: ptr(40)}); err != nil {
			t.Fatal(err)
		}
		if err := g.SetReasoning(ReasoningAsk{Effort: c.effort, Budget: c.budget, EffortParam: "e", BudgetParam: "b"}); err != nil {
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
		want := c.want
		if want == 0 {
			want = 40
		}
		if out.ReasoningTokens != want {
			t.Errorf("budget %v effort %v: %d reasoning tokens (%q, then %q), want %d", deref(c.budget), deref(c.effort),
				out.ReasoningTokens, rec.reasoning, rec.text, want)
		}
		if c.want != 0 && (len(rec.reasoning) != want-closeLen || rec.text != string(make40x(40-want))) {
			t.Errorf("budget %v: reasoning %q, answer %q", deref(c.budget), rec.reasoning, rec.text)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func make40x(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return b
}
