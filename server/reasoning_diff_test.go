package server

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// qwenReply is a Qwen3-like reply: reasoning, then the answer and a call.
var qwenReply = []string{"<think>", "\nLet", " me think.", "\n", "</think>", "\n\n", "Checking", ".",
	"<tool_call>", "\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Oslo\"}}", "\n</tool_call>"}

// TestReasoningAllAPIs: a reasoning model's reply is split on every API,
// whole and streamed alike: chat's reasoning_content and reasoning,
// Messages' thinking block with a signature that opens to it, Responses'
// reasoning item with its summary and encrypted_content; the text and the
// call after it; the reasoning's 5 tokens (markers included) in usage.
func TestReasoningAllAPIs(t *testing.T) {
	r := newReasonRig(t, thinkTags)
	r.script(qwenReply...)
	want := reply{reasoning: "\nLet me think.\n", text: "Checking.", calls: `get_weather({"city": "Oslo"});`, reasoningTokens: 5}
	for _, a := range apis {
		for _, streamed := range []bool{false, true} {
			got := r.get(t, a, "", streamed)
			w := want
			if a.name == "messages" {
				// Anthropic counts thinking in output_tokens; input is an
				// object, compacted.
				w.reasoningTokens, w.calls = 0, `get_weather({"city":"Oslo"});`
			}
			if got != w {
				t.Errorf("%s (stream %v): %+v, want %+v", a.name, streamed, got, w)
			}
		}
	}
}

// TestReasoningOff: with thinking off (enable_thinking false, reasoning
// effort none, thinking disabled) the prompt ends with the empty
// reasoning block, as a template with the switch writes it, so the model
// answers at once; with it on, no such block.
func TestReasoningOff(t *testing.T) {
	r := newReasonRig(t, thinkTags)
	r.script("Hi.")
	for i, c := range []struct {
		a     api
		extra string
		off   bool
	}{
		{apis[0], `"chat_template_kwargs":{"enable_thinking":false}`, true},
		{apis[0], `"reasoning_effort":"none"`, true},
		{apis[0], `"reasoning_effort":"low"`, false},
		{apis[1], `"thinking":{"type":"disabled"}`, true},
		{apis[1], `"thinking":{"type":"adaptive"}`, false},
		{apis[2], `"reasoning":{"effort":"none"}`, true},
	} {
		body := c.a.body(c.extra, false)
		if c.a.name == "responses" { // its body sets reasoning itself
			body = `{"input":"Weather?",` + c.extra + `}`
		}
		if resp := ssetest.Post(t, r.url+c.a.path, body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", body, resp.StatusCode)
		}
		p := streamtest.PromptText(r.eng.Submits()[i].Prompt)
		if got := strings.HasSuffix(p, "<think>\n\n</think>\n\n"); got != c.off {
			t.Errorf("%s %s: prompt %q, want the empty reasoning block %v", c.a.name, c.extra, p, c.off)
		}
	}
}

// TestNoReasoningModel: a model without reasoning markup (SmolLM2) takes
// every reasoning field, produces no reasoning, and reports 0 reasoning
// tokens; text that looks like markup is its content.
func TestNoReasoningModel(t *testing.T) {
	r := newReasonRig(t, stream.ReasoningMarkup{})
	r.script("<think>", "x", "</think>", "Hi.")
	for _, a := range apis {
		for _, streamed := range []bool{false, true} {
			got := r.get(t, a, "", streamed)
			if got.reasoning != "" || got.text != "<think>x</think>Hi." || got.reasoningTokens != 0 {
				t.Errorf("%s (stream %v): %+v", a.name, streamed, got)
			}
		}
	}
}

// FuzzStreamEqualsWhole: on all three APIs, for any reasoning, text and
// call cut into tokens anywhere (and coalesced by the flush as it falls),
// the concatenated streamed deltas (reasoning, text, calls) equal the
// whole reply byte for byte.
func FuzzStreamEqualsWhole(f *testing.F) {
	f.Add("\nLet me think.\n", "Checking.", true, uint64(0x9e3779b97f4a7c15), false)
	f.Add("", "Hi", false, uint64(1), false)
	f.Add("a</thi", "<think>b", false, uint64(7), true)
	f.Add("é漢\n", "\n\nDone ✓", true, uint64(12345), false)
	f.Add("x", "", true, uint64(3), true)
	r := newReasonRig(f, thinkTags)
	f.Fuzz(func(t *testing.T, reasoning, text string, call bool, cuts uint64, opened bool) {
		if len(reasoning)+len(text) > 200 {
			return
		}
		out := reasoning + "</think>\n\n" + text
		if !opened {
			out = "<think>" + out
		}
		if call {
			out += "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
		}
		r.script(cut(out, cuts)...)
		for _, a := range apis {
			whole, streamed := r.get(t, a, "", false), r.get(t, a, "", true)
			if a.name == "messages" {
				whole.reasoningTokens, streamed.reasoningTokens = 0, 0
			}
			if whole != streamed {
				t.Fatalf("%s: whole %+v, streamed %+v (pieces %q)", a.name, whole, streamed, cut(out, cuts))
			}
		}
	})
}

// cut splits s into pieces at the byte offsets the bits of cuts choose
// (UTF-8 characters may be split: the decoder holds them back).
func cut(s string, cuts uint64) []string {
	var out []string
	last := 0
	for i := 1; i < len(s); i++ {
		if cuts>>(uint(i)%64)&1 == 1 && (i/64)%2 == 0 || cuts>>(uint(i*7)%64)&1 == 1 && (i/64)%2 == 1 {
			out = append(out, s[last:i])
			last = i
		}
	}
	return append(out, s[last:])
}
