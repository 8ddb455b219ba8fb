package server

import (
	"bufio"
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestReasoningChoices: with n > 1 each choice's reasoning is split from
// its text as a single choice's is, whole and streamed (chat's
// reasoning_content and reasoning per choice, the call after it), and the
// usage sums the choices' reasoning tokens (5 each, markers included).
func TestReasoningChoices(t *testing.T) {
	r := newReasonRig(t, thinkTags)
	r.script(qwenReply...)
	checkReasoningChoices(t, r, reply{reasoning: "\nLet me think.\n", text: "Checking.", calls: `get_weather({"city": "Oslo"});`}, 5)
}

// TestHarmonyChoices: gpt-oss's harmony reply with n > 1: each choice's
// analysis is its reasoning, its commentary preamble its text and its
// call a call, as with one choice (TestHarmonyAllAPIs).
func TestHarmonyChoices(t *testing.T) {
	r := newHarmonyRig(t)
	ids := r.ids(harmonyReply)
	r.eng.Script = ids
	checkReasoningChoices(t, &r.reasonRig, harmonyWant, slices.Index(ids, r.ids("<|end|>")[0])+1)
}

// checkReasoningChoices asks r's chat for 3 choices, whole and streamed:
// each must read as want, and the usage count tokens reasoning tokens a
// choice.
func checkReasoningChoices(t *testing.T, r *reasonRig, want reply, tokens int) {
	t.Helper()
	const n = 3
	for _, streamed := range []bool{false, true} {
		body := apis[0].body(`"n":3`, streamed)
		resp := ssetest.Post(t, r.url+"/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			raw, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %v: %d %s", streamed, resp.StatusCode, raw)
		}
		got, usage := make([]reply, n), 0
		if !streamed {
			raw, _ := io.ReadAll(resp.Body)
			var c struct {
				Choices []struct {
					Index   int
					Message json.RawMessage
				}
				Usage json.RawMessage
			}
			mustJSON(t, raw, &c)
			if len(c.Choices) != n {
				t.Fatalf("%d choices, want %d: %s", len(c.Choices), n, raw)
			}
			for _, ch := range c.Choices {
				// One choice's message read as the single-choice reader reads it.
				one := apis[0].whole(t, []byte(`{"choices":[{"message":`+string(ch.Message)+`}],"usage":`+string(c.Usage)+`}`))
				usage = one.reasoningTokens
				one.reasoningTokens = 0
				got[ch.Index] = one
			}
		} else {
			evs := ssetest.Read(t, bufio.NewReader(resp.Body), 0)
			per := make([][]ssetest.Event, n)
			for _, e := range evs {
				if e.Data == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct{ Index int }
					Usage   *struct {
						Details struct {
							Reasoning int `json:"reasoning_tokens"`
						} `json:"completion_tokens_details"`
					}
				}
				mustJSON(t, []byte(e.Data), &c)
				if c.Usage != nil {
					usage = c.Usage.Details.Reasoning
				}
				for _, ch := range c.Choices {
					per[ch.Index] = append(per[ch.Index], e)
				}
			}
			for i := range per {
				got[i] = apis[0].stream(t, per[i])
			}
		}
		for i, g := range got {
			if g != want {
				t.Errorf("stream %v, choice %d: %+v, want %+v", streamed, i, g, want)
			}
		}
		if usage != n*tokens {
			t.Errorf("stream %v: %d reasoning tokens in usage, want %d", streamed, usage, n*tokens)
		}
	}
}
