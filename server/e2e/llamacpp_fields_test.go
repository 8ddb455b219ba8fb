package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestLlamaCppGrammarFields sends llama-server's output constraints as its
// users do, over raw HTTP, to chat and completions, streamed and not, on
// the default model: grammar (GBNF, a regular one and a recursive one),
// json_schema, and response_format json_object with a schema. The output
// is in the language asked for, and the grammar ended it (finish stop).
func TestLlamaCppGrammarFields(t *testing.T) {
	r := getRig(t)
	const person = `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
	isPerson := func(text string) bool {
		var p struct {
			Name *string `json:"name"`
			Age  *int    `json:"age"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		return dec.Decode(&p) == nil && p.Name != nil && p.Age != nil && !dec.More()
	}
	nested := regexp.MustCompile(`^(\()+[a-z](\))+$`)
	cases := []struct {
		name, field string
		chatOnly    bool
		ok          func(string) bool
	}{
		{"grammar a{5}", `"grammar":"root ::= \"a\"{5,5}"`, false, func(s string) bool { return s == "aaaaa" }},
		{"grammar recursive", `"grammar":"root ::= \"(\" inner \")\"\ninner ::= [a-z] | \"(\" inner \")\""`, false,
			func(s string) bool { return nested.MatchString(s) && strings.Count(s, "(") == strings.Count(s, ")") }},
		{"json_schema", `"json_schema":` + person, false, isPerson},
		{"response_format json_object schema", `"response_format":{"type":"json_object","schema":` + person + `}`, true, isPerson},
	}
	for _, c := range cases {
		for _, chat := range []bool{true, false} {
			if c.chatOnly && !chat {
				continue
			}
			for _, streaming := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/chat=%v/stream=%v", c.name, chat, streaming), func(t *testing.T) {
					path, input := "/v1/completions", `"prompt":"Once upon a time"`
					if chat {
						path, input = "/v1/chat/completions", `"messages":[{"role":"user","content":"Say something."}]`
					}
					body := fmt.Sprintf(`{%s,"max_tokens":60,"temperature":0.8,"seed":5,"stream":%v,%s}`, input, streaming, c.field)
					resp := r.post(t, path, body)
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
								Text         string                   `json:"text"`
								Message      struct{ Content string } `json:"message"`
								FinishReason string                   `json:"finish_reason"`
							} `json:"choices"`
						}
						if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
							t.Fatalf("response: %v", err)
						}
						text, finish = out.Choices[0].Text+out.Choices[0].Message.Content, out.Choices[0].FinishReason
					}
					if !c.ok(text) || finish != "stop" {
						t.Fatalf("%q (finish %s) is not in the requested language", text, finish)
					}
					t.Logf("%q", text)
				})
			}
		}
	}
}

// TestLlamaCppGrammarRefused: a GBNF grammar with a syntax error, a
// grammar beside another constraint, and a grammar of the wrong type are
// 400s naming the field (both fields, for two constraints), streamed or
// not, before the engine sees the request.
func TestLlamaCppGrammarRefused(t *testing.T) {
	r := getRig(t)
	before := r.waitIdle(t, 30*time.Second).Finished
	cases := []struct{ path, field, param, msg string }{
		{"/v1/chat/completions", `"grammar":"root ::= \"a"`, "grammar", "line 1 column 12: unexpected end of input"},
		{"/v1/completions", `"grammar":"root ::= nosuch"`, "grammar", "undefined rule identifier 'nosuch'"},
		{"/v1/completions", `"grammar":"rot ::= \"a\""`, "grammar", "does not define root"},
		{"/v1/chat/completions", `"grammar":5`, "grammar", "must be a string"},
		{"/v1/chat/completions", `"json_schema":{"type":"nosuch"}`, "json_schema", "nosuch"},
		{"/v1/chat/completions", `"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{}}},"grammar":"root ::= \"a\""`, "grammar", "response_format.json_schema.schema and grammar"},
		{"/v1/completions", `"grammar":"root ::= \"a\"","json_schema":{}`, "json_schema", "grammar and json_schema"},
		{"/v1/chat/completions", `"response_format":{"type":"json_schema","schema":{}}`, "response_format.schema", "json_object"},
	}
	for _, c := range cases {
		for _, streaming := range []bool{false, true} {
			input := `"prompt":"hi"`
			if strings.Contains(c.path, "chat") {
				input = `"messages":[{"role":"user","content":"hi"}]`
			}
			resp := r.post(t, c.path, fmt.Sprintf(`{%s,"max_tokens":4,"stream":%v,%s}`, input, streaming, c.field))
			var out struct {
				Error struct {
					Message string
					Param   *string
				}
			}
			raw, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(raw, &out); resp.StatusCode != 400 || err != nil || out.Error.Param == nil ||
				*out.Error.Param != c.param || !strings.Contains(out.Error.Message, c.msg) {
				t.Errorf("%s %s stream=%v: %d %s, want 400 on %s mentioning %q", c.path, c.field, streaming, resp.StatusCode, raw, c.param, c.msg)
			}
		}
	}
	if after := r.stats().Finished; after != before {
		t.Errorf("%d sequences ran for refused requests", after-before)
	}
}

// TestOpenAIPythonLlamaCppFields runs tests/openai-python/llamacpp_fields.py:
// the same fields through the official SDK's extra_body, and its refusals.
func TestOpenAIPythonLlamaCppFields(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	runPyScript(t, r, python, filepath.Join("openai-python", "llamacpp_fields.py"), "SLUICE_URL="+r.url)
}
