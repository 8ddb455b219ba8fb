package server

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestLogprobJSON: OpenAI's shape, a split character's token shown as
// U+FFFD with its exact bytes, -Inf as -9999, the alternatives in order.
func TestLogprobJSON(t *testing.T) {
	pieces := map[int32][]byte{1: []byte(" Par"), 2: {0xe6, 0x97}, 3: []byte("is")}
	f := &logprobFormat{top: 2, bytes: func(id int32) []byte { return pieces[id] }}
	raw := f.appendContent(nil, []int32{1, 2}, []engine.Logprob{
		{Logprob: -0.5, Top: []engine.TopLogprob{{ID: 1, Logprob: -0.5}, {ID: 3, Logprob: -1.25}}},
		{Logprob: float32(math.Inf(-1))},
	})
	var got struct {
		Content []struct {
			Token       string  `json:"token"`
			Logprob     float64 `json:"logprob"`
			Bytes       []int   `json:"bytes"`
			TopLogprobs []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"content"`
		Refusal *string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	c := got.Content
	if len(c) != 2 || c[0].Token != " Par" || c[0].Logprob != -0.5 || len(c[0].TopLogprobs) != 2 ||
		c[0].TopLogprobs[1].Token != "is" || c[0].TopLogprobs[1].Logprob != -1.25 ||
		c[1].Token != "\uFFFD" || len(c[1].Bytes) != 2 || c[1].Bytes[0] != 0xe6 || c[1].Logprob != -9999 || c[1].TopLogprobs == nil {
		t.Errorf("%s", raw)
	}
}

// TestLogprobsRequest: chat takes a boolean and top_logprobs 0-20 (needing
// logprobs), or the count as completions take it (logprobs N: true with N
// alternatives); completions' logprobs and logprobs beside tools are
// refused.
func TestLogprobsRequest(t *testing.T) {
	for body, want := range map[string]string{
		`{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`:                                     "top_logprobs",
		`{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`:                                                      "top_logprobs",
		`{"messages":[{"role":"user","content":"x"}],"logprobs":"yes"}`:                                                      "logprobs",
		`{"messages":[{"role":"user","content":"x"}],"logprobs":21}`:                                                         "logprobs",
		`{"messages":[{"role":"user","content":"x"}],"logprobs":-1}`:                                                         "logprobs",
		`{"messages":[{"role":"user","content":"x"}],"logprobs":3,"top_logprobs":2}`:                                         "top_logprobs",
		`{"messages":[{"role":"user","content":"x"}],"logprobs":true,"tools":[{"type":"function","function":{"name":"f"}}]}`: "logprobs",
	} {
		if _, err := parseRequest([]byte(body), true); err == nil || toAPIError(err).Param == nil || *toAPIError(err).Param != want {
			t.Errorf("%s: %v, want param %s", body, err, want)
		}
	}
	for body, param := range map[string]string{
		`{"prompt":"x","reasoning_effort":"low"}`:      "reasoning_effort",
		`{"prompt":"x","logprobs":6}`:                  "logprobs",
		`{"prompt":"x","logprobs":true}`:               "logprobs",
		`{"prompt":"x","logprobs":1,"top_logprobs":1}`: "top_logprobs",
	} {
		if _, err := parseRequest([]byte(body), false); err == nil || *toAPIError(err).Param != param {
			t.Errorf("%s: %v, want param %s", body, err, param)
		}
	}
	if g, err := parseRequest([]byte(`{"prompt":"x","logprobs":0}`), false); err != nil || !g.Logprobs || g.TopLogprobs != 0 {
		t.Errorf("completions logprobs 0: %+v %v", g, err)
	}
	g, err := parseRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":20}`), true)
	if err != nil || !g.Logprobs || g.TopLogprobs != 20 {
		t.Errorf("%+v %v", g, err)
	}
	for _, body := range []string{`"logprobs":3`, `"logprobs":3,"top_logprobs":3`} {
		g, err := parseRequest([]byte(`{"messages":[{"role":"user","content":"x"}],`+body+`}`), true)
		if err != nil || !g.Logprobs || g.TopLogprobs != 3 {
			t.Errorf("chat %s: %+v %v, want logprobs with 3 alternatives", body, g, err)
		}
	}
}

// TestCompletionLogprobJSON: the completions shape, the sampled token in
// its top map, offsets in characters continuing across calls (chunks).
func TestCompletionLogprobJSON(t *testing.T) {
	pieces := map[int32][]byte{1: []byte(" Pé"), 2: []byte("ris"), 3: []byte("x")}
	f := &logprobFormat{top: 1, bytes: func(id int32) []byte { return pieces[id] }}
	var got struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float64            `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
	raw := f.appendCompletion(nil, []int32{1}, []engine.Logprob{{Logprob: -0.5, Top: []engine.TopLogprob{{ID: 3, Logprob: -0.25}}}})
	raw2 := f.appendCompletion(nil, []int32{2}, []engine.Logprob{{Logprob: -1, Top: []engine.TopLogprob{{ID: 2, Logprob: -1}}}})
	if err := json.Unmarshal(raw, &got); err != nil || len(got.Tokens) != 1 || got.Tokens[0] != " Pé" || got.TokenLogprobs[0] != -0.5 ||
		len(got.TopLogprobs[0]) != 2 || got.TopLogprobs[0]["x"] != -0.25 || got.TextOffset[0] != 0 {
		t.Errorf("%s %v", raw, err)
	}
	got.TopLogprobs = nil // a map decoded into would keep the first chunk's keys
	if err := json.Unmarshal(raw2, &got); err != nil || got.TextOffset[0] != 3 || len(got.TopLogprobs[0]) != 1 {
		t.Errorf("second chunk %s %v", raw2, err)
	}
}
