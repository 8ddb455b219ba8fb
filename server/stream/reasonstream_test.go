package stream_test

import (
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

type splitRec struct{ reasoning, text string }

func (r *splitRec) Text(text string, _ []int32) error { r.text += text; return nil }
func (r *splitRec) Reasoning(text string) error       { r.reasoning += text; return nil }
func (r *splitRec) KeepAlive() error                  { return nil }
func (r *splitRec) Flush() error                      { return nil }

// TestReasonStreamSplit: the split of each format, one piece per Text:
// reasoning only at the start (after whitespace), a template-opened
// reasoning, a reply cut inside its reasoning or inside the opening
// marker, and the exact token count (markers included).
func TestReasonStreamSplit(t *testing.T) {
	think, _ := ReasoningMarkupFor("think-tags")
	gemma, _ := ReasoningMarkupFor("gemma4-channel")
	for _, c := range []struct {
		name            string
		mk              ReasoningMarkup
		opener          string // what the template ends the prompt with
		pieces          []string
		reasoning, text string
		tokens          int
	}{
		{"qwen3", think, "", []string{"<think>", "\nhm", "\n", "</think>", "\n\n", "Hi"}, "\nhm\n", "Hi", 4},
		{"leading space", think, "", []string{" ", "<th", "ink>", "a</th", "ink>", "b"}, "a", "b", 5}, // the space shows nowhere: it counts with the reasoning
		{"no reasoning", think, "", []string{"Hi <think>", "x</think>"}, "", "Hi <think>x</think>", 0},
		{"opened by the template", think, "<think>\n", []string{"a", "b", "</think>", "c"}, "ab", "c", 3},
		{"cut inside", think, "", []string{"<think>", "a", "</thi"}, "a</thi", "", 3},
		{"cut in the opener", think, "", []string{"<thi"}, "", "<thi", 0},
		{"gemma 4", gemma, "", []string{"<|channel>thought\n", "plan", "<channel|>", "Answer"}, "plan", "Answer", 3},
	} {
		v := streamtest.NewPieceVocab()
		tok := openerVocab{v, c.opener}
		b := &Backend{Tokenizer: tok, Reasoning: c.mk}
		g := &GenRequest{}
		_ = g.SetMessages([]ChatMessage{{Role: "user", Content: "q"}})
		prompt, err := TokenizePrompt(b, g, false)
		if err != nil {
			t.Fatal(err)
		}
		rs := NewReasonStream(b, g, prompt)
		rec := &splitRec{}
		em := rs.Use(rec, rec)
		for i, id := range v.IDs(c.pieces...) {
			_ = em.Text(c.pieces[i], []int32{id})
		}
		out := rs.End(Outcome{Finish: "length"})
		if rec.reasoning != c.reasoning || rec.text != c.text || out.ReasoningTokens != c.tokens {
			t.Errorf("%s: reasoning %q text %q tokens %d, want %q %q %d", c.name, rec.reasoning, rec.text, out.ReasoningTokens,
				c.reasoning, c.text, c.tokens)
		}
	}
}

type openerVocab struct {
	*streamtest.PieceVocab
	opener string
}

func (o openerVocab) ChatPrompt(msgs []ChatMessage) (string, error) {
	p, err := o.PieceVocab.ChatPrompt(msgs)
	return p + o.opener, err
}
