package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// thinkTranscript is Transcript whose template shows an assistant turn's
// reasoning_content, as Qwen3's does for the turns of the current loop.
type thinkTranscript struct{ streamtest.Transcript }

func (t thinkTranscript) RenderChat(msgs []map[string]any, tools []any) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		r, _ := m["reasoning_content"].(string)
		if r != "" {
			r = "<think>" + r + "</think>"
		}
		fmt.Fprintf(&b, "<%s>%s%v\n", m["role"], r, m["content"])
	}
	return b.String() + "<assistant>", nil
}

// TestReasoningRoundTrip: the reasoning a stateless client carries back
// (chat's reasoning_content, a Messages thinking block's signature, a
// Responses reasoning item's encrypted_content) reaches the template with
// its assistant turn, so the next prompt is the one the server would have
// built itself; a seal this server did not make carries nothing.
func TestReasoningRoundTrip(t *testing.T) {
	r := newReasonRigWith(t, thinkTags, func(v *streamtest.PieceVocab) stream.Tokenizer {
		return thinkTranscript{streamtest.Transcript{PieceVocab: v}}
	})
	r.script("ok")
	const reasoning = "\nThe user wants weather.\n"
	seal := httpedge.Seal(reasoning)
	tools := `"tools":[{"type":"function","function":` + weatherTool + `}]`
	for i, c := range []struct {
		path, body string
		carried    bool
	}{
		{"/v1/chat/completions", `{` + tools + `,"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":"Checking.","reasoning_content":"` + strings.ReplaceAll(reasoning, "\n", `\n`) + `"},{"role":"user","content":"Thanks"}]}`, true},
		{"/v1/messages", `{"max_tokens":10,"tools":[` + strings.Replace(weatherTool, `"parameters"`, `"input_schema"`, 1) + `],"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"` + seal + `"},{"type":"text","text":"Checking."}]},{"role":"user","content":"Thanks"}]}`, true},
		{"/v1/messages", `{"max_tokens":10,"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"` + seal + `"},{"type":"text","text":"Checking."}]},{"role":"user","content":"Thanks"}]}`, true},
		{"/v1/messages", `{"max_tokens":10,"tools":[` + strings.Replace(weatherTool, `"parameters"`, `"input_schema"`, 1) + `],"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"forged","signature":"c2lnbmF0dXJl"},{"type":"text","text":"Checking."}]},{"role":"user","content":"Thanks"}]}`, false},
		{"/v1/responses", `{"tools":[` + strings.Replace(weatherTool, `{`, `{"type":"function",`, 1) + `],"input":[{"role":"user","content":"Weather?"},
			{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"` + seal + `"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},{"role":"user","content":"Thanks"}]}`, true},
	} {
		if resp := ssetest.Post(t, r.url+c.path, c.body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", c.path, resp.StatusCode)
		}
		p := streamtest.PromptText(r.eng.Submits()[i].Prompt)
		want := "<assistant><think>" + reasoning + "</think>Checking.\n"
		if strings.Contains(p, want) != c.carried || (!c.carried && !strings.Contains(p, "<assistant>Checking.\n")) {
			t.Errorf("%s: prompt %q, want the reasoning carried: %v", c.path, p, c.carried)
		}
	}
}
