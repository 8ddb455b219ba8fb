package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// toolShape is one API's tool calls as the fake upstream streams them and
// as the relay's client reads them back.
type toolShape struct {
	name, path string
	body       string // a streaming request offering tools, with a stop string found in the arguments
	start      func(w http.ResponseWriter)
	text       func(w http.ResponseWriter, s string)
	// callStart opens call i (the API's index of it), args a raw fragment.
	callStart func(w http.ResponseWriter, i int, id, name string)
	args      func(w http.ResponseWriter, i int, raw string)
	callEnd   func(w http.ResponseWriter, i int)
	end       func(w http.ResponseWriter) // tool_calls / tool_use, usage 7 in / 3 out
	read      func(t *testing.T, evs []namedEvent) toolResult
	whole     func(t *testing.T, raw string) toolResult // a non-streaming response
	finish    string                                    // the finish the client should read
	forwarded []string                                  // request fields the upstream must get as sent
}

type wireCall struct{ ID, Name, Args string }

type toolResult struct {
	text, finish string
	calls        []wireCall
	in, out      float64
	errCode      string
	ended        bool
}

// calls accumulates deltas by the API's index, in the order calls opened.
type callAcc struct {
	order []int
	by    map[int]*wireCall
}

func (a *callAcc) open(i int, id, name string) {
	if a.by == nil {
		a.by = map[int]*wireCall{}
	}
	a.by[i] = &wireCall{ID: id, Name: name}
	a.order = append(a.order, i)
}

func (a *callAcc) add(t *testing.T, i int, s string) {
	c, ok := a.by[i]
	if !ok {
		t.Fatalf("arguments for call %d before its start", i)
	}
	c.Args += s
}

func (a *callAcc) list() []wireCall {
	var out []wireCall
	for _, i := range a.order {
		out = append(out, *a.by[i])
	}
	return out
}

const toolsJSON = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}]`

var chatTools = toolShape{
	name: "chat", path: "/v1/chat/completions",
	body: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_old","type":"function","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_old","content":"noon"}],` +
		`"tools":` + toolsJSON + `,"tool_choice":"required","parallel_tool_calls":true,"stop":["city"],"stream":true,"stream_options":{"include_usage":true}}`,
	start: sseStart,
	text: func(w http.ResponseWriter, s string) {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", rawJSON(s))
		flush(w)
	},
	callStart: func(w http.ResponseWriter, i int, id, name string) {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":%q,\"type\":\"function\",\"function\":{\"name\":%q,\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n", i, id, name)
		flush(w)
	},
	args: func(w http.ResponseWriter, i int, raw string) {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":%s}}]},\"finish_reason\":null}]}\n\n", i, argJSON(raw))
		flush(w)
	},
	callEnd: func(http.ResponseWriter, int) {},
	end:     func(w http.ResponseWriter) { finish(w, "tool_calls") },
	read: func(t *testing.T, evs []namedEvent) toolResult {
		var r toolResult
		var acc callAcc
		for _, ev := range evs {
			if ev.data == "[DONE]" {
				r.ended = true
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Index    int    `json:"index"`
							ID       string `json:"id"`
							Function struct {
								Name      string `json:"name"`
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
				Usage *struct {
					PromptTokens     float64 `json:"prompt_tokens"`
					CompletionTokens float64 `json:"completion_tokens"`
				} `json:"usage"`
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
				t.Fatalf("bad chunk %q: %v", ev.data, err)
			}
			if c.Error != nil {
				r.errCode = c.Error.Code
			}
			if c.Usage != nil {
				r.in, r.out = c.Usage.PromptTokens, c.Usage.CompletionTokens
			}
			for _, ch := range c.Choices {
				r.text += ch.Delta.Content
				for _, tc := range ch.Delta.ToolCalls {
					if tc.ID != "" {
						acc.open(tc.Index, tc.ID, tc.Function.Name)
					}
					acc.add(t, tc.Index, tc.Function.Arguments)
				}
				if ch.FinishReason != nil {
					r.finish = *ch.FinishReason
				}
			}
		}
		r.calls = acc.list()
		return r
	},
	whole: func(t *testing.T, raw string) toolResult {
		var b struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct{ PromptTokens, CompletionTokens float64 } `json:"usage"`
		}
		if err := json.Unmarshal([]byte(raw), &b); err != nil || len(b.Choices) != 1 {
			t.Fatalf("whole response %s: %v", raw, err)
		}
		ch := b.Choices[0]
		r := toolResult{text: ch.Message.Content, finish: ch.FinishReason, ended: true}
		for _, c := range ch.Message.ToolCalls {
			if c.Type != "function" {
				t.Errorf("call type %q", c.Type)
			}
			r.calls = append(r.calls, wireCall{c.ID, c.Function.Name, c.Function.Arguments})
		}
		return r
	},
	finish:    "tool_calls",
	forwarded: []string{"tools", "tool_choice", "parallel_tool_calls", "messages"},
}

var messagesTools = toolShape{
	name: "messages", path: "/v1/messages",
	body: `{"model":"m","max_tokens":32,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_old","name":"get_time","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_old","content":"noon"}]}],` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"get_time","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"stop_sequences":["city"],"stream":true}`,
	start: messagesShape.start,
	text:  messagesShape.text,
	callStart: func(w http.ResponseWriter, i int, id, name string) {
		named(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
		named(w, "content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i+1, id, name))
	},
	args: func(w http.ResponseWriter, i int, raw string) {
		named(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i+1, argJSON(raw)))
	},
	callEnd: func(w http.ResponseWriter, i int) {
		named(w, "content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i+1))
	},
	end: func(w http.ResponseWriter) {
		named(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":3}}`)
		named(w, "message_stop", `{"type":"message_stop"}`)
	},
	read: func(t *testing.T, evs []namedEvent) toolResult {
		var r toolResult
		var acc callAcc
		for i, ev := range evs {
			var e struct {
				Type         string `json:"type"`
				Index        int    `json:"index"`
				ContentBlock *struct {
					Type, ID, Name string
				} `json:"content_block"`
				Delta struct {
					Type        string  `json:"type"`
					Text        string  `json:"text"`
					PartialJSON string  `json:"partial_json"`
					StopReason  *string `json:"stop_reason"`
				} `json:"delta"`
				Usage *struct {
					InputTokens  float64 `json:"input_tokens"`
					OutputTokens float64 `json:"output_tokens"`
				} `json:"usage"`
				Error *struct{ Code string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Type != ev.name {
				t.Fatalf("event %d %q: data %q (%v)", i, ev.name, ev.data, err)
			}
			switch e.Type {
			case "content_block_start":
				if e.ContentBlock.Type == "tool_use" {
					acc.open(e.Index, e.ContentBlock.ID, e.ContentBlock.Name)
				}
			case "content_block_delta":
				switch e.Delta.Type {
				case "text_delta":
					r.text += e.Delta.Text
				case "input_json_delta":
					acc.add(t, e.Index, e.Delta.PartialJSON)
				}
			case "message_delta":
				if e.Delta.StopReason != nil {
					r.finish = *e.Delta.StopReason
				}
				if e.Usage != nil {
					r.in, r.out = e.Usage.InputTokens, e.Usage.OutputTokens
				}
			case "message_stop":
				r.ended = true
			case "error":
				r.errCode = e.Error.Code
			}
		}
		r.calls = acc.list()
		return r
	},
	whole: func(t *testing.T, raw string) toolResult {
		var b struct {
			Content []struct {
				Type, Text, ID, Name string
				Input                json.RawMessage
			} `json:"content"`
			StopReason string `json:"stop_reason"`
		}
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Fatalf("whole message %s: %v", raw, err)
		}
		r := toolResult{finish: b.StopReason, ended: true}
		for _, c := range b.Content {
			switch c.Type {
			case "text":
				r.text += c.Text
			case "tool_use":
				r.calls = append(r.calls, wireCall{c.ID, c.Name, string(c.Input)})
			}
		}
		return r
	},
	finish:    "tool_use",
	forwarded: []string{"tools", "tool_choice", "messages"},
}

var responsesTools = toolShape{
	name: "responses", path: "/v1/responses",
	body: `{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call","call_id":"call_old","name":"get_time","arguments":"{}"},{"type":"function_call_output","call_id":"call_old","output":"noon"}],` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},{"type":"function","name":"get_time","parameters":{"type":"object"}}],"tool_choice":"required","parallel_tool_calls":true,"stream":true}`,
	start: responsesShape.start,
	text:  responsesShape.text,
	callStart: func(w http.ResponseWriter, i int, id, name string) {
		responsesEvent(w, "response.output_item.added", fmt.Sprintf(`,"output_index":%d,"item":{"type":"function_call","id":"fc_up%d","call_id":%q,"name":%q,"arguments":"","status":"in_progress"}`, i+1, i, id, name))
	},
	args: func(w http.ResponseWriter, i int, raw string) {
		responsesEvent(w, "response.function_call_arguments.delta", fmt.Sprintf(`,"output_index":%d,"item_id":"fc_up%d","delta":%s`, i+1, i, argJSON(raw)))
	},
	callEnd: func(w http.ResponseWriter, i int) {
		responsesEvent(w, "response.function_call_arguments.done", fmt.Sprintf(`,"output_index":%d,"item_id":"fc_up%d","arguments":"..."`, i+1, i))
		responsesEvent(w, "response.output_item.done", fmt.Sprintf(`,"output_index":%d,"item":{"type":"function_call","id":"fc_up%d"}`, i+1, i))
	},
	end: func(w http.ResponseWriter) {
		responsesEvent(w, "response.completed", `,"response":{"id":"resp_up","status":"completed","usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10}}`)
	},
	read: func(t *testing.T, evs []namedEvent) toolResult {
		var r toolResult
		var acc callAcc
		for i, ev := range evs {
			var e struct {
				Type        string `json:"type"`
				Seq         *int   `json:"sequence_number"`
				OutputIndex int    `json:"output_index"`
				Delta       string `json:"delta"`
				Code        string `json:"code"`
				Item        *struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
					Name   string `json:"name"`
				} `json:"item"`
				Response *struct {
					Status string `json:"status"`
					Output []struct {
						Type      string `json:"type"`
						CallID    string `json:"call_id"`
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"output"`
					Usage *struct {
						InputTokens  float64 `json:"input_tokens"`
						OutputTokens float64 `json:"output_tokens"`
					} `json:"usage"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Type != ev.name || e.Seq == nil || *e.Seq != i {
				t.Fatalf("event %d %q: data %q (%v)", i, ev.name, ev.data, err)
			}
			switch e.Type {
			case "response.output_item.added":
				if e.Item.Type == "function_call" {
					acc.open(e.OutputIndex, e.Item.CallID, e.Item.Name)
				}
			case "response.output_text.delta":
				r.text += e.Delta
			case "response.function_call_arguments.delta":
				acc.add(t, e.OutputIndex, e.Delta)
			case "response.completed", "response.incomplete", "response.failed":
				r.finish, r.ended = e.Response.Status, e.Type != "response.failed"
				if u := e.Response.Usage; u != nil {
					r.in, r.out = u.InputTokens, u.OutputTokens
				}
				if e.Type == "response.completed" {
					var final []wireCall
					for _, o := range e.Response.Output {
						if o.Type == "function_call" {
							final = append(final, wireCall{o.CallID, o.Name, o.Arguments})
						}
					}
					if !reflect.DeepEqual(final, acc.list()) {
						t.Errorf("response.completed carries calls %+v, the deltas made %+v", final, acc.list())
					}
				}
			case "error":
				r.errCode = e.Code
			}
		}
		r.calls = acc.list()
		return r
	},
	whole: func(t *testing.T, raw string) toolResult {
		var b struct {
			Status string `json:"status"`
			Output []struct {
				Type      string `json:"type"`
				CallID    string `json:"call_id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
				Content   []struct{ Text string }
			} `json:"output"`
		}
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Fatalf("whole response %s: %v", raw, err)
		}
		r := toolResult{finish: b.Status, ended: true}
		for _, o := range b.Output {
			switch o.Type {
			case "message":
				for _, c := range o.Content {
					r.text += c.Text
				}
			case "function_call":
				r.calls = append(r.calls, wireCall{o.CallID, o.Name, o.Arguments})
			}
		}
		return r
	},
	finish:    "completed",
	forwarded: []string{"tools", "tool_choice", "parallel_tool_calls", "input"},
}

// argJSON quotes an arguments fragment byte for byte (a character may be
// cut at its end), escaping only what JSON must.
func argJSON(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

var toolShapes = []toolShape{chatTools, messagesTools, responsesTools}

// The calls the fake upstream makes: Zürich's ü split between two
// fragments (a character cut across events), keys cut mid-word, and the
// stop string "city" inside the arguments, where it must not stop them.
var (
	weatherArgs = []string{`{"ci`, `ty": "Z` + "\xc3", "\xbc" + `rich`, `", "unit":`, ` "c"}`}
	timeArgs    = []string{`{"tz"`, `:"CET"}`}
	wantCalls   = []wireCall{{"call_up0", "get_weather", `{"city": "Zürich", "unit": "c"}`}, {"call_up1", "get_time", `{"tz":"CET"}`}}
)

// toolScript streams the text "Let me look.", then the two calls, then
// (unless cut) the ending.
func toolScript(sh toolShape, cut bool) func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
	return func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sh.start(w)
		sh.text(w, "Let me ")
		sh.text(w, "look.")
		ids := []string{"call_up0", "call_up1"}
		if sh.name == "messages" {
			ids = []string{"toolu_up0", "toolu_up1"}
		}
		sh.callStart(w, 0, ids[0], "get_weather")
		for i, a := range weatherArgs {
			sh.args(w, 0, a)
			if cut && i == 2 {
				return // closed mid-arguments
			}
		}
		sh.callEnd(w, 0)
		sh.callStart(w, 1, ids[1], "get_time")
		for _, a := range timeArgs {
			sh.args(w, 1, a)
		}
		sh.callEnd(w, 1)
		sh.end(w)
	}
}

func (sh toolShape) want() []wireCall {
	w := append([]wireCall(nil), wantCalls...)
	if sh.name == "messages" {
		w[0].ID, w[1].ID = "toolu_up0", "toolu_up1"
	}
	return w
}

// TestRelayToolCalls: tools through the relay on each API against a fake
// upstream of the same API: the request's tools, tool_choice and tool
// history reach the upstream as sent; the streamed calls (fragments split
// mid-key and mid-character, the client's stop string inside them) reach
// the client in the API's shape with the upstream's ids, finish and usage;
// a whole response carries them; a cut mid-arguments is upstream_truncated,
// a malformed call delta upstream_malformed; and a reconnect replays the
// call deltas exactly, with no second upstream request. No leaks.
func TestRelayToolCalls(t *testing.T) {
	for _, sh := range toolShapes {
		t.Run(sh.name+"/stream", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, toolScript(sh, false))
			rig := newRelay(t, up, fast)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rig.url+sh.path, strings.NewReader(sh.body))
			first := readShape(t, req, 0)
			if first.status != http.StatusOK {
				t.Fatalf("%d %s", first.status, first.raw)
			}
			res := sh.read(t, first.evs)
			if res.text != "Let me look." || !reflect.DeepEqual(res.calls, sh.want()) || res.finish != sh.finish || !res.ended || res.in != 7 || res.out != 3 {
				t.Errorf("got %+v, want the text, calls %+v, finish %s, usage 7/3", res, sh.want(), sh.finish)
			}
			for _, c := range res.calls {
				if !json.Valid([]byte(c.Args)) {
					t.Errorf("call %s: arguments %q are not JSON", c.Name, c.Args)
				}
			}
			var sent map[string]any
			_ = json.Unmarshal([]byte(sh.body), &sent)
			got := <-up.bodies
			for _, f := range sh.forwarded {
				if !reflect.DeepEqual(got[f], sent[f]) {
					t.Errorf("upstream got %s = %v, the client sent %v", f, got[f], sent[f])
				}
			}
			// Reconnect after the second event: the rest is replayed from
			// the relay's log exactly, tool deltas included.
			again, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, rig.url+"/v1/streams/"+first.streamID, nil)
			again.Header.Set("Last-Event-ID", "2")
			rest := readShape(t, again, 0)
			// (A ping, the Messages keep-alive, has an id but is not in evs.)
			if n := len(rest.evs); rest.status != http.StatusOK || n < len(first.evs)-2 || !reflect.DeepEqual(rest.evs, first.evs[len(first.evs)-n:]) {
				t.Fatalf("resume: %d %s: replayed %d events, want the last %d as first sent", rest.status, rest.raw, n, len(first.evs)-2)
			}
			if replayed := sh.read(t, append(first.evs[:len(first.evs)-len(rest.evs):len(first.evs)-len(rest.evs)], rest.evs...)); !reflect.DeepEqual(replayed.calls, sh.want()) {
				t.Errorf("the resumed stream's calls %+v, want %+v", replayed.calls, sh.want())
			}
			if n := up.requests.Load(); n != 1 {
				t.Errorf("%d upstream requests: a resume must never start a second generation", n)
			}
		})
		t.Run(sh.name+"/whole", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, toolScript(sh, false))
			rig := newRelay(t, up, fast)
			body := strings.Replace(sh.body, `"stream":true`, `"stream":false`, 1)
			body = strings.Replace(body, `,"stream_options":{"include_usage":true}`, "", 1)
			resp, err := http.Post(rig.url+sh.path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s %v", resp.StatusCode, raw, err)
			}
			res := sh.whole(t, string(raw))
			want := sh.want()
			if sh.name == "messages" { // the input is the arguments' JSON, as the SDKs parse it
				for i := range want {
					var v any
					_ = json.Unmarshal([]byte(want[i].Args), &v)
					b, _ := json.Marshal(v)
					want[i].Args = string(b)
				}
			}
			if res.text != "Let me look." || !reflect.DeepEqual(res.calls, want) || res.finish != sh.finish {
				t.Errorf("got %+v, want the text, calls %+v, finish %s", res, want, sh.finish)
			}
		})
		t.Run(sh.name+"/cut mid-arguments", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, toolScript(sh, true))
			rig := newRelay(t, up, fast)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rig.url+sh.path, strings.NewReader(sh.body))
			r := readShape(t, req, 0)
			res := sh.read(t, r.evs)
			if r.status != http.StatusOK || res.errCode != "upstream_truncated" || res.finish == sh.finish || len(res.calls) != 1 || res.calls[0].Args != `{"city": "Zürich` {
				t.Errorf("got %d %+v, want the call so far then upstream_truncated", r.status, res)
			}
		})
		t.Run(sh.name+"/malformed call delta", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sh.start(w)
				sh.callStart(w, 0, "call_up0", "get_weather")
				sh.args(w, 0, `{"ci`)
				// Arguments that are an object, not a JSON string.
				bad := map[string]string{
					"chat":      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":{}}}]}}]}\n\n",
					"messages":  "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":{}}}\n\n",
					"responses": "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":0,\"output_index\":1,\"delta\":{}}\n\n",
				}[sh.name]
				fmt.Fprint(w, bad)
				flush(w)
				<-r.Context().Done()
				f.gone <- struct{}{}
			})
			rig := newRelay(t, up, fast)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rig.url+sh.path, strings.NewReader(sh.body))
			r := readShape(t, req, 0)
			if res := sh.read(t, r.evs); r.status != http.StatusOK || res.errCode != "upstream_malformed" || res.finish == sh.finish {
				t.Errorf("got %d %+v, want upstream_malformed", r.status, res)
			}
			awaitGone(t, up)
			if n := counter(t, rig.reg, "sluice_relay_upstream_errors_total", "kind", "malformed"); n != 1 {
				t.Errorf("malformed errors counted %v, want 1", n)
			}
		})
	}
}
