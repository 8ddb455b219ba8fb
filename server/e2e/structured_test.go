package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestStructuredOutputsLive asks the default model for constrained output
// through every field a client may use, streamed and not: what comes back
// is in the requested language, whatever a 135M model would say unaided,
// and the finish reason says the grammar completed (not max_tokens).
func TestStructuredOutputsLive(t *testing.T) {
	r := getRig(t)
	const person = `{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer"},"city":{"enum":["Paris","Rome","Oslo"]}},"required":["name","age","city"],"additionalProperties":false}`
	checkPerson := func(t *testing.T, text string) {
		var p struct {
			Name *string `json:"name"`
			Age  *int    `json:"age"`
			City *string `json:"city"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil || p.Name == nil || p.Age == nil || p.City == nil ||
			!slices.Contains([]string{"Paris", "Rome", "Oslo"}, *p.City) || dec.More() {
			t.Fatalf("%q does not match the schema (%v)", text, err)
		}
	}
	cases := []struct {
		name, field string
		check       func(t *testing.T, text string)
	}{
		{"json_schema", `"response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + person + `}}`, checkPerson},
		{"structured_outputs json", `"structured_outputs":{"json":` + person + `}`, checkPerson},
		{"json_object", `"response_format":{"type":"json_object"}`, func(t *testing.T, text string) {
			var v map[string]any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Fatalf("%q is not a JSON object: %v", text, err)
			}
		}},
		{"regex", `"structured_outputs":{"regex":"[0-9]{3}-[0-9]{4}"}`, func(t *testing.T, text string) {
			if !regexp.MustCompile(`^[0-9]{3}-[0-9]{4}$`).MatchString(text) {
				t.Fatalf("%q does not match", text)
			}
		}},
		{"choice", `"structured_outputs":{"choice":["positive","negative","neutral"]}`, func(t *testing.T, text string) {
			if !slices.Contains([]string{"positive", "negative", "neutral"}, text) {
				t.Fatalf("%q is not a choice", text)
			}
		}},
		{"lark", `"structured_outputs":{"grammar":"start: \"(\" NUM (\"+\" NUM)* \")\"\nNUM: /[1-9][0-9]?/"}`, func(t *testing.T, text string) {
			if !regexp.MustCompile(`^\([1-9][0-9]?(\+[1-9][0-9]?)*\)$`).MatchString(text) {
				t.Fatalf("%q is not in the grammar", text)
			}
		}},
	}
	for _, c := range cases {
		for _, streaming := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", c.name, streaming), func(t *testing.T) {
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Describe a person who lives in Europe."}],"max_tokens":120,"temperature":0.8,"seed":3,"stream":%v,%s}`, streaming, c.field)
				resp := r.post(t, "/v1/chat/completions", body)
				if resp.StatusCode != 200 {
					raw, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d: %s", resp.StatusCode, raw)
				}
				var text, finish string
				if streaming {
					s := decode(t, ssetest.Read(t, bufio.NewReader(resp.Body), 0))
					text, finish = s.text, s.finish
				} else {
					var out struct {
						Choices []struct {
							Message      struct{ Content string } `json:"message"`
							FinishReason string                   `json:"finish_reason"`
						} `json:"choices"`
					}
					if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
						t.Fatalf("response: %v", err)
					}
					text, finish = out.Choices[0].Message.Content, out.Choices[0].FinishReason
				}
				if finish != "stop" {
					t.Fatalf("finish %q after %q", finish, text)
				}
				c.check(t, text)
				t.Logf("%q", text)
			})
		}
	}
}

// TestStructuredOutputsRefused: a schema or grammar llguidance cannot
// compile, and a response_format type that does not exist, are 400s with
// the reason, before the engine sees the request.
func TestStructuredOutputsRefused(t *testing.T) {
	r := getRig(t)
	// A sequence an earlier test abandoned may still be ending (slowly, under
	// -race): count from an idle engine so only this test's requests show.
	before := r.waitIdle(t, 30*time.Second).Finished
	cases := []struct{ field, param, msg string }{
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"nosuch"}}}`, "response_format.json_schema.schema", "nosuch"},
		{`"response_format":{"type":"xml"}`, "response_format.type", "xml"},
		{`"structured_outputs":{"regex":"([a-z]"}`, "structured_outputs.regex", "regex"},
		{`"structured_outputs":{"grammar":"start: missing_rule"}`, "structured_outputs.grammar", "missing_rule"},
	}
	for _, c := range cases {
		resp := r.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true,`+c.field+`}`)
		var out struct {
			Error struct {
				Message, Type string
				Param         *string
			}
		}
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &out); resp.StatusCode != 400 || err != nil || out.Error.Param == nil ||
			*out.Error.Param != c.param || !strings.Contains(out.Error.Message, c.msg) {
			t.Errorf("%s: %d %s, want 400 on %s mentioning %q", c.field, resp.StatusCode, raw, c.param, c.msg)
		}
	}
	if after := r.stats().Finished; after != before {
		t.Errorf("%d sequences ran for refused requests", after-before)
	}
}
