package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// reasonRig serves all three APIs over a ScriptEngine whose tokenizer has
// a tool-capable template (streamtest.Transcript) and mk's reasoning
// markup: a tiny synthetic Qwen3-like model. script sets the pieces the
// next requests generate.
type reasonRig struct {
	url string
	v   *streamtest.PieceVocab
	eng *streamtest.ScriptEngine
}

func newReasonRig(t testing.TB, mk stream.ReasoningMarkup) *reasonRig {
	t.Helper()
	return newReasonRigWith(t, mk, func(v *streamtest.PieceVocab) stream.Tokenizer { return streamtest.Transcript{PieceVocab: v} })
}

func newReasonRigWith(t testing.TB, mk stream.ReasoningMarkup, tok func(*streamtest.PieceVocab) stream.Tokenizer) *reasonRig {
	t.Helper()
	v := streamtest.NewPieceVocab()
	eng := &streamtest.ScriptEngine{}
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(&stream.Backend{Engine: eng, Tokenizer: tok(v), ContextLen: 1 << 16, Reasoning: mk}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.HTTPServer().Handler)
	t.Cleanup(hs.Close)
	return &reasonRig{url: hs.URL, v: v, eng: eng}
}

func (r *reasonRig) script(pieces ...string) { r.eng.Script = r.v.IDs(pieces...) }

var thinkTags, _ = stream.ReasoningMarkupFor("think-tags")

// reply is one response as a client reads it: the reasoning, the text and
// the calls ("name(arguments);" each), and the reasoning tokens.
type reply struct {
	reasoning, text, calls string
	reasoningTokens        int
}

// api is one API's request and how its whole and streamed replies read.
type api struct {
	name, path string
	body       func(extra string, stream bool) string
	whole      func(t testing.TB, raw []byte) reply
	stream     func(t testing.TB, evs []ssetest.Event) reply
}

const weatherTool = `{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}`

func sfx(extra string) string {
	if extra == "" {
		return ""
	}
	return "," + extra
}

var apis = []api{
	{name: "chat", path: "/v1/chat/completions",
		body: func(extra string, s bool) string {
			return `{"messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":` + weatherTool + `}],"stream":` +
				map[bool]string{true: `true,"stream_options":{"include_usage":true}`, false: "false"}[s] + sfx(extra) + `}`
		},
		whole: func(t testing.TB, raw []byte) reply {
			var c struct {
				Choices []struct {
					Message struct {
						Content, Reasoning string
						ReasoningContent   string `json:"reasoning_content"`
						ToolCalls          []struct {
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
				}
				Usage struct {
					Details struct {
						Reasoning int `json:"reasoning_tokens"`
					} `json:"completion_tokens_details"`
				}
			}
			mustJSON(t, raw, &c)
			m := c.Choices[0].Message
			if m.Reasoning != m.ReasoningContent {
				t.Errorf("reasoning %q, reasoning_content %q", m.Reasoning, m.ReasoningContent)
			}
			r := reply{reasoning: m.ReasoningContent, text: m.Content, reasoningTokens: c.Usage.Details.Reasoning}
			for _, tc := range m.ToolCalls {
				r.calls += tc.Function.Name + "(" + tc.Function.Arguments + ");"
			}
			return r
		},
		stream: func(t testing.TB, evs []ssetest.Event) reply {
			var r reply
			var names, args []string
			for _, e := range evs {
				if e.Data == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct {
						Delta struct {
							Content, Reasoning string
							ReasoningContent   string `json:"reasoning_content"`
							ToolCalls          []struct {
								Index    int
								Function struct{ Name, Arguments string }
							} `json:"tool_calls"`
						}
					}
					Usage *struct {
						Details struct {
							Reasoning int `json:"reasoning_tokens"`
						} `json:"completion_tokens_details"`
					}
				}
				mustJSON(t, []byte(e.Data), &c)
				if c.Usage != nil {
					r.reasoningTokens = c.Usage.Details.Reasoning
				}
				for _, ch := range c.Choices {
					d := ch.Delta
					if d.Reasoning != d.ReasoningContent {
						t.Errorf("delta reasoning %q, reasoning_content %q", d.Reasoning, d.ReasoningContent)
					}
					r.reasoning += d.ReasoningContent
					r.text += d.Content
					for _, tc := range d.ToolCalls {
						for len(names) <= tc.Index {
							names, args = append(names, ""), append(args, "")
						}
						names[tc.Index] += tc.Function.Name
						args[tc.Index] += tc.Function.Arguments
					}
				}
			}
			for i := range names {
				r.calls += names[i] + "(" + args[i] + ");"
			}
			return r
		}},
	{name: "messages", path: "/v1/messages",
		body: func(extra string, s bool) string {
			return `{"max_tokens":1000,"messages":[{"role":"user","content":"Weather?"}],"tools":[` +
				strings.Replace(weatherTool, `"parameters"`, `"input_schema"`, 1) + `],"stream":` + map[bool]string{true: "true", false: "false"}[s] + sfx(extra) + `}`
		},
		whole: func(t testing.TB, raw []byte) reply {
			var m struct {
				Content []struct {
					Type, Text, Thinking, Signature, Name string
					Input                                 json.RawMessage
				}
			}
			mustJSON(t, raw, &m)
			var r reply
			for _, b := range m.Content {
				switch b.Type {
				case "thinking":
					r.reasoning += b.Thinking
					checkSeal(t, b.Signature, b.Thinking)
				case "text":
					r.text += b.Text
				case "tool_use":
					r.calls += b.Name + "(" + string(b.Input) + ");"
				}
			}
			return r
		},
		stream: func(t testing.TB, evs []ssetest.Event) reply {
			var r reply
			sig, open, input := "", "", ""
			for _, e := range evs {
				var d struct {
					Type         string
					ContentBlock struct{ Type, Name string } `json:"content_block"`
					Delta        struct {
						Type, Text, Thinking, Signature string
						PartialJSON                     string `json:"partial_json"`
					}
				}
				mustJSON(t, []byte(e.Data), &d)
				switch {
				case d.Type == "content_block_start":
					open = d.ContentBlock.Type
					if open == "tool_use" {
						r.calls += d.ContentBlock.Name + "("
					}
				case d.Type == "content_block_stop" && open == "tool_use":
					// input is an object: the message's is the same JSON,
					// compacted by the encoder.
					var c bytes.Buffer
					if err := json.Compact(&c, []byte(input)); err != nil {
						t.Errorf("input_json_delta fragments %q: %v", input, err)
					}
					r.calls += c.String() + ");"
					input = ""
				case d.Delta.Type == "thinking_delta":
					r.reasoning += d.Delta.Thinking
				case d.Delta.Type == "signature_delta":
					sig = d.Delta.Signature
				case d.Delta.Type == "text_delta":
					r.text += d.Delta.Text
				case d.Delta.Type == "input_json_delta":
					input += d.Delta.PartialJSON
				}
			}
			if r.reasoning != "" {
				checkSeal(t, sig, r.reasoning)
			}
			return r
		}},
	{name: "responses", path: "/v1/responses",
		body: func(extra string, s bool) string {
			return `{"input":"Weather?","reasoning":{"summary":"auto"},"include":["reasoning.encrypted_content"],"tools":[` +
				strings.Replace(weatherTool, `{`, `{"type":"function",`, 1) + `],"stream":` + map[bool]string{true: "true", false: "false"}[s] + sfx(extra) + `}`
		},
		whole: func(t testing.TB, raw []byte) reply {
			var resp struct {
				Output []struct {
					Type, Name, Arguments string
					Content               []struct{ Text string }
					Summary               []struct{ Text string }
					EncryptedContent      string `json:"encrypted_content"`
				}
				Usage struct {
					Details struct {
						Reasoning int `json:"reasoning_tokens"`
					} `json:"output_tokens_details"`
				}
			}
			mustJSON(t, raw, &resp)
			r := reply{reasoningTokens: resp.Usage.Details.Reasoning}
			for _, it := range resp.Output {
				switch it.Type {
				case "reasoning":
					r.reasoning += it.Content[0].Text
					if len(it.Summary) != 1 || it.Summary[0].Text != it.Content[0].Text {
						t.Errorf("reasoning summary %+v, content %+v", it.Summary, it.Content)
					}
					checkSeal(t, it.EncryptedContent, it.Content[0].Text)
				case "message":
					r.text += it.Content[0].Text
				case "function_call":
					r.calls += it.Name + "(" + it.Arguments + ");"
				}
			}
			return r
		},
		stream: func(t testing.TB, evs []ssetest.Event) reply {
			var r reply
			for _, e := range evs {
				var d struct {
					Delta string
					Item  struct{ Type, Name string }
				}
				mustJSON(t, []byte(e.Data), &d)
				switch e.Name {
				case "response.reasoning_text.delta":
					r.reasoning += d.Delta
				case "response.output_text.delta":
					r.text += d.Delta
				case "response.output_item.added":
					if d.Item.Type == "function_call" {
						r.calls += d.Item.Name + "("
					}
				case "response.function_call_arguments.delta":
					r.calls += d.Delta
				case "response.output_item.done":
					if d.Item.Type == "function_call" {
						r.calls += ");"
					}
				case "response.completed", "response.incomplete":
					var c struct {
						Response struct {
							Usage struct {
								Details struct {
									Reasoning int `json:"reasoning_tokens"`
								} `json:"output_tokens_details"`
							}
						}
					}
					mustJSON(t, []byte(e.Data), &c)
					r.reasoningTokens = c.Response.Usage.Details.Reasoning
				}
			}
			return r
		}},
}

func mustJSON(t testing.TB, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// checkSeal: a signature or encrypted_content opens to the reasoning.
func checkSeal(t testing.TB, sealed, text string) {
	t.Helper()
	if got, err := httpedge.Unseal(sealed); err != nil || got != text {
		t.Errorf("seal %q opens to %q, %v; want %q", sealed, got, err, text)
	}
}

// get runs one request on a and reads its reply, whole or streamed.
func (r *reasonRig) get(t testing.TB, a api, extra string, streamed bool) reply {
	t.Helper()
	resp := ssetest.Post(t, r.url+a.path, a.body(extra, streamed))
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", a.name, resp.StatusCode, raw)
	}
	if !streamed {
		raw, _ := io.ReadAll(resp.Body)
		return a.whole(t, raw)
	}
	br := bufio.NewReader(resp.Body)
	if a.name == "chat" {
		return a.stream(t, ssetest.Read(t, br, 0))
	}
	return a.stream(t, ssetest.ReadNamed(t, br, 0))
}
