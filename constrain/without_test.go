package constrain_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/constrain"
)

// TextWithout admits prose, refuses the token that would complete a banned
// opener however the text was cut into tokens, and refuses an at-start
// opener only at the start; the end of generation stays allowed.
func TestTextWithout(t *testing.T) {
	tok, v := smolVocab(t)
	hermes := constrain.TextWithout([]string{"<tool_call>"}, nil)
	llama := constrain.TextWithout([]string{"<|python_tag|>"}, []string{`{"name"`})
	cases := []struct {
		g       constrain.Grammar
		text    string
		refused bool
	}{
		{hermes, "The weather in Paris is sunny, 21 °C.\nAsk me <more>!", false},
		{hermes, `Sure. <tool_call>{"name": "get_weather"}`, true},
		{hermes, `<tool_call>`, true},
		{hermes, `a <tool_cal> b </tool_call>`, false},
		{llama, `{"name": "get_weather", "parameters": {}}`, true},
		{llama, "  \n{\"name\": 1}", true},
		{llama, `Call it like {"name": "f"} later.`, false},
		{llama, `ok <|python_tag|>`, true},
	}
	eos := tok.EOGIDs()[0]
	mask := make([]uint32, v.MaskWords())
	for _, c := range cases {
		m, err := v.NewMatcher(c.g)
		if err != nil {
			t.Fatalf("%q: %v", c.g.Data, err)
		}
		ids := tok.Encode(c.text, false)
		first := feed(t, v, m, ids)
		if c.refused != (first >= 0) {
			t.Errorf("%q: first refused token %d of %d, want refused=%v", c.text, first, len(ids), c.refused)
			continue
		}
		if c.refused {
			continue
		}
		if err := m.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if !allowed(mask, eos) {
			t.Errorf("%q: end of generation not allowed", c.text)
		}
	}
	// One token short of the opener, nothing the mask allows completes it:
	// checked over the whole vocabulary, so no spelling slips through.
	for _, prefix := range []string{"Sure. <tool_", "Sure. <", "Sure. <tool_call"} {
		m, err := v.NewMatcher(hermes)
		if err != nil {
			t.Fatal(err)
		}
		ids := tok.Encode(prefix, false)
		if first := feed(t, v, m, ids); first >= 0 {
			t.Fatalf("%q refused at token %d", prefix, first)
		}
		if err := m.Mask(mask); err != nil {
			t.Fatal(err)
		}
		n := 0
		for id := range int32(v.Size()) {
			if !allowed(mask, id) {
				continue
			}
			n++
			if s := tok.Decode(append(ids[:len(ids):len(ids)], id), false); strings.Contains(s, "<tool_call>") {
				t.Errorf("after %q the mask allows token %d, which makes %q", prefix, id, s)
			}
		}
		if n < v.Size()/2 {
			t.Errorf("after %q only %d of %d tokens allowed", prefix, n, v.Size())
		}
	}
}
