package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

func TestParseRequestRejects(t *testing.T) {
	tests := []struct {
		name  string
		chat  bool
		body  string
		param string
	}{
		{"not JSON", true, `{"messages":`, ""},
		{"messages missing", true, `{"model":"m"}`, "messages"},
		{"messages wrong type", true, `{"messages":"hi"}`, "messages"},
		{"bad role", true, `{"messages":[{"role":"wizard of oz","content":"x"}]}`, "messages[0].role"}, // a custom role must be a name
		{"image part", true, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content"},
		{"content number", true, `{"messages":[{"role":"user","content":3}]}`, "messages[0].content"},
		{"prompt missing", false, `{}`, "prompt"},
		{"prompt object", false, `{"prompt":{}}`, "prompt"},
		{"max_tokens string", false, `{"prompt":"x","max_tokens":"5"}`, "max_tokens"},
		{"max_tokens zero", false, `{"prompt":"x","max_tokens":0}`, "max_tokens"},
		{"max_completion_tokens negative", true, `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":-1}`, "max_completion_tokens"},
		{"temperature high", false, `{"prompt":"x","temperature":2.5}`, "temperature"},
		{"temperature string", false, `{"prompt":"x","temperature":"hot"}`, "temperature"},
		{"top_p zero", false, `{"prompt":"x","top_p":0}`, "top_p"},
		{"top_p high", false, `{"prompt":"x","top_p":1.1}`, "top_p"},
		{"top_k negative", false, `{"prompt":"x","top_k":-2}`, "top_k"},
		{"top_k fraction", false, `{"prompt":"x","top_k":1.5}`, "top_k"},
		{"min_p high", false, `{"prompt":"x","min_p":2}`, "min_p"},
		{"presence_penalty low", false, `{"prompt":"x","presence_penalty":-3}`, "presence_penalty"},
		{"frequency_penalty high", false, `{"prompt":"x","frequency_penalty":2.01}`, "frequency_penalty"},
		{"repetition_penalty zero", false, `{"prompt":"x","repetition_penalty":0}`, "repetition_penalty"},
		{"seed string", false, `{"prompt":"x","seed":"7"}`, "seed"},
		{"stop number", false, `{"prompt":"x","stop":5}`, "stop"},
		{"stop empty string", false, `{"prompt":"x","stop":[""]}`, "stop"},
		{"too many stops", false, `{"prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, "stop"},
		{"stream string", false, `{"prompt":"x","stream":"yes"}`, "stream"},
		{"stream_options without stream", false, `{"prompt":"x","stream_options":{"include_usage":true}}`, "stream_options"},
		{"include_usage wrong type", false, `{"prompt":"x","stream":true,"stream_options":{"include_usage":1}}`, "stream_options.include_usage"},
		{"n zero", false, `{"prompt":"x","n":0}`, "n"},
		{"n above 16", false, `{"prompt":"x","n":17}`, "n"},
		{"empty prompt list", false, `{"prompt":[]}`, "prompt"},
		{"empty token list in a list", false, `{"prompt":["a",[]]}`, "prompt[1]"},
		{"prompt list of objects", false, `{"prompt":[{"a":1}]}`, "prompt[0]"},
		{"user number", false, `{"prompt":"x","user":5}`, "user"},
		{"role number", true, `{"messages":[{"role":"user","content":"x"},{"role":5}]}`, "messages[1].role"},
		{"message not an object", true, `{"messages":["hi"]}`, "messages[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tt.body), tt.chat)
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want an APIError", err)
			}
			if ae.Status != http.StatusBadRequest || ae.Type != "invalid_request_error" {
				t.Errorf("status %d type %q, want 400 invalid_request_error", ae.Status, ae.Type)
			}
			param := ""
			if ae.Param != nil {
				param = *ae.Param
			}
			if param != tt.param {
				t.Errorf("param %q, want %q (message %q)", param, tt.param, ae.Message)
			}
			if strings.Contains(ae.Message, "server.") || strings.Contains(ae.Message, "[]") || strings.Contains(ae.Message, "int32") {
				t.Errorf("message %q names a Go type", ae.Message)
			}
			var wire struct {
				Error map[string]any `json:"error"`
			}
			body, _ := json.Marshal(ae)
			if json.Unmarshal(body, &wire) != nil || wire.Error["message"] == "" {
				t.Errorf("error JSON %s is not OpenAI's shape", body)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := wire.Error[k]; !ok {
					t.Errorf("error JSON %s lacks %q", body, k)
				}
			}
		})
	}
}

func TestParseRequestAccepts(t *testing.T) {
	seven := uint64(7)
	tests := []struct {
		name string
		chat bool
		body string
		want stream.GenRequest
	}{
		{"chat with every field and unknown ones", true,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"!"}]}],
			  "max_tokens":9,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":7,"stop":"END","presence_penalty":0.1,
			  "frequency_penalty":-0.2,"repetition_penalty":1.1,"stream":true,"stream_options":{"include_usage":true},"user":"u1",
			  "logit_bias":{},"tools":[],"n":1}`,
			stream.GenRequest{Model: "m", Chat: true, Messages: []stream.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi!"}}, MaxTokens: 9,
				Stop: []string{"END"}, Stream: true, IncludeUsage: true, User: "u1"}},
		{"max_completion_tokens wins over max_tokens", true,
			`{"messages":[{"role":"user","content":"x"}],"max_tokens":5,"max_completion_tokens":6}`,
			stream.GenRequest{Chat: true, Messages: []stream.ChatMessage{{Role: "user", Content: "x"}}, MaxTokens: 6}},
		{"null fields are absent", true,
			`{"messages":[{"role":"assistant","content":null}],"temperature":null,"stop":null,"stream":null}`,
			stream.GenRequest{Chat: true, Messages: []stream.ChatMessage{{Role: "assistant", Content: ""}}}},
		{"prompt as one-string list, top_k -1 is off", false, `{"prompt":["hello"],"top_k":-1,"stop":["a","b"]}`,
			stream.GenRequest{Prompt: "hello", Stop: []string{"a", "b"}}},
		{"developer is the system role", true, `{"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"x"}]}`,
			stream.GenRequest{Chat: true, Messages: []stream.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "x"}}}},
		{"prompt as token ids", false, `{"prompt":[1,2,3]}`, stream.GenRequest{PromptIDs: []int32{1, 2, 3}}},
		{"prompt list, n", false, `{"prompt":["a",[1,2]],"n":3}`, stream.GenRequest{N: 3, Batch: []stream.BatchPrompt{{Text: "a"}, {IDs: []int32{1, 2}}}}},
		{"list of one token-id list", false, `{"prompt":[[5,6]]}`, stream.GenRequest{PromptIDs: []int32{5, 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseRequest([]byte(tt.body), tt.chat)
			if err != nil {
				t.Fatal(err)
			}
			sp := g.Sampling
			g.Sampling = tt.want.Sampling
			gotJSON, _ := json.Marshal(g)
			wantJSON, _ := json.Marshal(tt.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
			}
			if tt.name == "chat with every field and unknown ones" {
				want := [...]float32{0.5, 0.9, 0.05, 1.1, 0.1, -0.2}
				got := [...]float32{sp.Temperature, sp.TopP, sp.MinP, sp.RepetitionPenalty, sp.PresencePenalty, sp.FrequencyPenalty}
				if got != want || sp.TopK != 40 || sp.Seed == nil || *sp.Seed != seven {
					t.Errorf("sampling %+v", sp)
				}
			}
		})
	}
}

func TestErrorTableStatuses(t *testing.T) {
	for _, err := range []error{engine.ErrQueueFull, stream.ErrResumeGap, stream.ErrStall} {
		ae, c := toAPIError(errors.Join(errors.New("context"), err)), stream.Classify(err)
		if ae.Status != c.HTTP || *ae.Code != c.Code {
			t.Errorf("%v: got %d %s, want %d %s", err, ae.Status, *ae.Code, c.HTTP, c.Code)
		}
	}
	if ae := toAPIError(errors.New("boom")); ae.Status != http.StatusInternalServerError {
		t.Errorf("unknown error got %d, want 500", ae.Status)
	}
}
