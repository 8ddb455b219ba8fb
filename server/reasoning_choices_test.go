package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
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

// TestReasoningChoicesResume cuts an n=2 stream of a reasoning model inside
// its reasoning and reconnects: each choice goes on through its own split
// (the reasoning state lives with the stream, not the connection), so the
// joined stream's reasoning, content and usage (reasoning tokens included)
// equal an uninterrupted one's.
func TestReasoningChoicesResume(t *testing.T) {
	v := streamtest.NewPieceVocab()
	script := []string{"<think>", "Let", " me", " think", " a", " while", ".", "</think>", "\n\n", "The", " quick", " brown", " fox", "."}
	eng := &streamtest.ScriptEngine{Script: v.IDs(script...), Interval: 5 * time.Millisecond}
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(&stream.Backend{Engine: eng, Tokenizer: v, ContextLen: 64, Reasoning: thinkTags}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.HTTPServer().Handler)
	t.Cleanup(hs.Close)
	rig := &testRig{url: hs.URL, eng: eng, srv: srv}
	body := fmt.Sprintf(chatBody, "", true, `,"n":2,"seed":7,"stream_options":{"include_usage":true}`)
	type choice struct{ reasoning, content string }
	read := func(evs []ssetest.Event) ([2]choice, string) {
		var cs [2]choice
		var usage string
		for _, e := range evs {
			if e.Data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Index int
					Delta struct {
						Content          string
						ReasoningContent string `json:"reasoning_content"`
					}
				}
				Usage json.RawMessage
			}
			mustJSON(t, []byte(e.Data), &c)
			if c.Usage != nil {
				usage = string(c.Usage)
			}
			for _, ch := range c.Choices {
				cs[ch.Index].reasoning += ch.Delta.ReasoningContent
				cs[ch.Index].content += ch.Delta.Content
			}
		}
		return cs, usage
	}
	want, wantUsage := read(ssetest.Read(t, bufio.NewReader(rig.post(t, "/v1/chat/completions", body).Body), 0))
	if want[0] != (choice{"Let me think a while.", "The quick brown fox."}) || want[1] != want[0] ||
		!strings.Contains(wantUsage, `"reasoning_tokens":16`) {
		t.Fatalf("uninterrupted: %+v, usage %s", want, wantUsage)
	}
	id, first := cutChat(t, rig, body, 4) // the roles and the reasoning's first deltas
	again := resumeChat(t, rig, body, id, first[len(first)-1].ID, false)
	if again.StatusCode != 200 {
		t.Fatalf("resume: %d", again.StatusCode)
	}
	got, usage := read(append(first, ssetest.Read(t, bufio.NewReader(again.Body), 0)...))
	if got != want || usage != wantUsage {
		t.Errorf("resumed: %+v, usage %s; uninterrupted %+v, usage %s", got, usage, want, wantUsage)
	}
}
