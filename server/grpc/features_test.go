package grpcserver

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// The gRPC twins of the HTTP API's tools, structured outputs and logprobs,
// on the default model: the same stream core, so a 135M model's output is
// valid JSON / a valid call whatever it would say unaided.

func smolRig(t *testing.T) *rig {
	t.Helper()
	if _, err := os.Stat(smolLM); err != nil {
		t.Skipf("default model absent (%v): make model", err)
	}
	return newRig(t, rigOptions{path: smolLM, ctxLen: 2048})
}

func chatInput(user string) *sluicev1.GenerateRequest_Chat {
	return &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{Messages: []*sluicev1.ChatMessage{{Role: "user", Content: user}}}}
}

// collectedCall is one call joined from its deltas.
type collectedCall struct {
	id, name, args string
	deltas         int
}

func TestStructuredOutputsGRPC(t *testing.T) {
	r := smolRig(t)
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
		name  string
		set   func(*sluicev1.GenerateRequest)
		check func(t *testing.T, text string)
	}{
		{"response_format json_schema", func(g *sluicev1.GenerateRequest) {
			g.ResponseFormat = &sluicev1.ResponseFormat{Format: &sluicev1.ResponseFormat_JsonSchema{
				JsonSchema: &sluicev1.JSONSchemaFormat{Name: "person", SchemaJson: person, Strict: ptr(true)}}}
		}, checkPerson},
		{"structured_outputs json", func(g *sluicev1.GenerateRequest) {
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Json{Json: person}}
		}, checkPerson},
		{"response_format json_object", func(g *sluicev1.GenerateRequest) {
			g.ResponseFormat = &sluicev1.ResponseFormat{Format: &sluicev1.ResponseFormat_JsonObject{JsonObject: &sluicev1.JSONObjectFormat{}}}
		}, func(t *testing.T, text string) {
			var v map[string]any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Fatalf("%q is not a JSON object: %v", text, err)
			}
		}},
		{"structured_outputs regex", func(g *sluicev1.GenerateRequest) {
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Regex{Regex: "[0-9]{3}-[0-9]{4}"}}
		}, func(t *testing.T, text string) {
			if !regexp.MustCompile(`^[0-9]{3}-[0-9]{4}$`).MatchString(text) {
				t.Fatalf("%q does not match", text)
			}
		}},
		{"structured_outputs choice", func(g *sluicev1.GenerateRequest) {
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Choice{
				Choice: &sluicev1.Choices{Choices: []string{"positive", "negative", "neutral"}}}}
		}, func(t *testing.T, text string) {
			if !slices.Contains([]string{"positive", "negative", "neutral"}, text) {
				t.Fatalf("%q is not a choice", text)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := &sluicev1.GenerateRequest{Input: chatInput("Describe a person living in a European city."), Sampling: greedy(120)}
			c.set(req)
			got := drain(mustGenerate(t, r, req))
			if got.err != nil || got.complete == nil {
				t.Fatalf("err %v, complete %v", got.err, got.complete)
			}
			if f := got.complete.GetFinishReason(); f != "stop" {
				t.Fatalf("finish_reason %q (the grammar did not complete), text %q", f, got.text)
			}
			c.check(t, got.text)
		})
	}
}

// TestStructuredOutputsRefusedGRPC: a schema, regex or grammar llguidance
// refuses is INVALID_ARGUMENT with its message, before any token (the call
// fails at its first Recv with no message), as HTTP answers 400.
func TestStructuredOutputsRefusedGRPC(t *testing.T) {
	r := smolRig(t)
	cases := []struct {
		name string
		set  func(*sluicev1.GenerateRequest)
		want string
	}{
		{"unknown schema type", func(g *sluicev1.GenerateRequest) {
			g.ResponseFormat = &sluicev1.ResponseFormat{Format: &sluicev1.ResponseFormat_JsonSchema{
				JsonSchema: &sluicev1.JSONSchemaFormat{Name: "x", SchemaJson: `{"type":"nosuch"}`}}}
		}, "nosuch"},
		{"schema not JSON", func(g *sluicev1.GenerateRequest) {
			g.ResponseFormat = &sluicev1.ResponseFormat{Format: &sluicev1.ResponseFormat_JsonSchema{
				JsonSchema: &sluicev1.JSONSchemaFormat{Name: "x", SchemaJson: `{"type":`}}}
		}, "schema_json is not valid JSON"},
		{"schema without name", func(g *sluicev1.GenerateRequest) {
			g.ResponseFormat = &sluicev1.ResponseFormat{Format: &sluicev1.ResponseFormat_JsonSchema{
				JsonSchema: &sluicev1.JSONSchemaFormat{SchemaJson: `{}`}}}
		}, "response_format.json_schema.name is required"},
		{"bad regex", func(g *sluicev1.GenerateRequest) {
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Regex{Regex: "[0-9"}}
		}, "structured_outputs.regex"},
		{"bad grammar", func(g *sluicev1.GenerateRequest) {
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Grammar{Grammar: "start: nosuch_rule"}}
		}, "structured_outputs.grammar"},
		{"both constraints", func(g *sluicev1.GenerateRequest) {
			g.ResponseFormat = &sluicev1.ResponseFormat{Format: &sluicev1.ResponseFormat_JsonObject{JsonObject: &sluicev1.JSONObjectFormat{}}}
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Regex{Regex: "a"}}
		}, "choose one"},
		{"empty choice", func(g *sluicev1.GenerateRequest) {
			g.StructuredOutputs = &sluicev1.StructuredOutputs{Constraint: &sluicev1.StructuredOutputs_Choice{Choice: &sluicev1.Choices{}}}
		}, "structured_outputs.choice must list at least one string"},
		{"tool_choice without tools", func(g *sluicev1.GenerateRequest) {
			g.ToolChoice = &sluicev1.ToolChoice{Choice: &sluicev1.ToolChoice_Mode{Mode: "required"}}
		}, "tool_choice is only allowed when tools are specified"},
		{"named function not listed", func(g *sluicev1.GenerateRequest) {
			g.Tools = weatherToolsPB()
			g.ToolChoice = &sluicev1.ToolChoice{Choice: &sluicev1.ToolChoice_Function{Function: "nope"}}
		}, "tool_choice names function \"nope\""},
		{"bad tool name", func(g *sluicev1.GenerateRequest) {
			g.Tools = []*sluicev1.Tool{{Name: "has space"}}
		}, "tools[0].function.name must be"},
		{"tool answers no call", func(g *sluicev1.GenerateRequest) {
			g.Tools = weatherToolsPB()
			g.Input = &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{Messages: []*sluicev1.ChatMessage{
				{Role: "user", Content: "Weather?"}, {Role: "tool", Content: "sunny", ToolCallId: "call_x"}}}}
		}, "answers no earlier tool call"},
		{"history arguments not JSON", func(g *sluicev1.GenerateRequest) {
			g.Tools = weatherToolsPB()
			g.Input = &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{Messages: []*sluicev1.ChatMessage{
				{Role: "user", Content: "Weather?"}, {Role: "assistant", ToolCalls: []*sluicev1.ToolCall{{Id: "c1", Name: "get_weather", Arguments: "{city"}}}}}}
		}, "messages[1].tool_calls[0].function.arguments must be JSON text"},
		{"tools on a text prompt", func(g *sluicev1.GenerateRequest) {
			g.Tools, g.Input = weatherToolsPB(), textInput("Weather?")
		}, "tools need chat input"},
		{"top_logprobs without logprobs", func(g *sluicev1.GenerateRequest) { g.TopLogprobs = 3 }, "top_logprobs needs logprobs"},
		{"top_logprobs over 20", func(g *sluicev1.GenerateRequest) { g.Logprobs, g.TopLogprobs = true, 21 }, "top_logprobs must be between 0 and 20"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := &sluicev1.GenerateRequest{Input: chatInput("Hi"), Sampling: greedy(8)}
			c.set(req)
			got := drain(mustGenerate(t, r, req))
			st, _ := status.FromError(got.err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) || got.chunks != 0 {
				t.Fatalf("got %v after %d chunks, want INVALID_ARGUMENT containing %q", got.err, got.chunks, c.want)
			}
		})
	}
}

func weatherToolsPB() []*sluicev1.Tool {
	return []*sluicev1.Tool{
		{Name: "get_weather", Description: "Current weather in a city",
			ParametersJson: `{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}`},
		{Name: "get_time", Description: "Current time in a timezone",
			ParametersJson: `{"type":"object","properties":{"tz":{"type":"string","maxLength":30}},"required":["tz"],"additionalProperties":false}`},
	}
}

// TestToolCallStreamGRPC: "required" and a named function force a call the
// deltas carry: the name alone in the call's first delta, then argument
// fragments that join into JSON matching the tool's schema, finish_reason
// tool_calls, and no call text in the chunks' text.
func TestToolCallStreamGRPC(t *testing.T) {
	r := smolRig(t)
	for _, c := range []struct {
		name   string
		choice *sluicev1.ToolChoice
		want   string // the function that must be called; "" any
	}{
		{"required", &sluicev1.ToolChoice{Choice: &sluicev1.ToolChoice_Mode{Mode: "required"}}, ""},
		{"named", &sluicev1.ToolChoice{Choice: &sluicev1.ToolChoice_Function{Function: "get_time"}}, "get_time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &sluicev1.GenerateRequest{Input: chatInput("What is the weather in Paris?"), Sampling: greedy(100),
				Tools: weatherToolsPB(), ToolChoice: c.choice, ParallelToolCalls: ptr(false)}
			call := mustGenerate(t, r, req)
			calls := map[uint32]*collectedCall{}
			var text string
			var complete *sluicev1.GenerateComplete
			for {
				msg, err := call.Recv()
				if err != nil {
					break
				}
				if ch := msg.GetChunk(); ch != nil {
					text += ch.GetText()
					for _, d := range ch.GetToolCalls() {
						cc := calls[d.GetIndex()]
						if cc == nil {
							if d.GetId() == "" || d.GetName() == "" || d.GetArguments() != "" {
								t.Fatalf("a call's first delta is %v: want id and name, no arguments", d)
							}
							cc = &collectedCall{id: d.GetId(), name: d.GetName()}
							calls[d.GetIndex()] = cc
						} else if d.GetId() != "" || d.GetName() != "" {
							t.Fatalf("a later delta names the call again: %v", d)
						}
						cc.args += d.GetArguments()
						cc.deltas++
					}
				}
				if msg.GetComplete() != nil {
					complete = msg.GetComplete()
				}
			}
			if complete.GetFinishReason() != "tool_calls" || len(calls) != 1 || calls[0] == nil {
				t.Fatalf("finish %q, calls %v, text %q", complete.GetFinishReason(), calls, text)
			}
			if strings.Contains(text, "<tool_call>") || strings.Contains(text, "{") {
				t.Fatalf("call text reached the chunks' text: %q", text)
			}
			cc := calls[0]
			if c.want != "" && cc.name != c.want {
				t.Fatalf("called %q, want %q", cc.name, c.want)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(cc.args), &args); err != nil {
				t.Fatalf("arguments %q are not JSON: %v", cc.args, err)
			}
			switch cc.name {
			case "get_weather":
				city, _ := args["city"].(string)
				unit, _ := args["unit"].(string)
				if city == "" || (unit != "celsius" && unit != "fahrenheit") || len(args) != 2 {
					t.Fatalf("get_weather arguments %v do not match the schema", args)
				}
			case "get_time":
				if tz, _ := args["tz"].(string); tz == "" || len(args) != 1 {
					t.Fatalf("get_time arguments %v do not match the schema", args)
				}
			default:
				t.Fatalf("called %q, which no tool is", cc.name)
			}
			t.Logf("%s(%s) in %d deltas", cc.name, cc.args, cc.deltas)
		})
	}
	r.idle(t)
}

// TestToolHistoryGRPC: a call and its result in the history render through
// the template; the reply after them is the model's, parsed for calls.
func TestToolHistoryGRPC(t *testing.T) {
	r := smolRig(t)
	msgs := []*sluicev1.ChatMessage{
		{Role: "user", Content: "What is the weather in Paris?"},
		{Role: "assistant", ToolCalls: []*sluicev1.ToolCall{{Id: "call_1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`}}},
		{Role: "tool", Content: `{"temperature": 21, "sky": "clear"}`, ToolCallId: "call_1"},
	}
	got := drain(mustGenerate(t, r, &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{Messages: msgs}},
		Sampling: greedy(30), Tools: weatherToolsPB(), ToolChoice: &sluicev1.ToolChoice{Choice: &sluicev1.ToolChoice_Mode{Mode: "none"}}}))
	if got.err != nil || got.complete == nil || got.text == "" || got.complete.GetFinishReason() == "tool_calls" {
		t.Fatalf("err %v, complete %v, text %q", got.err, got.complete, got.text)
	}
	t.Logf("%q", got.text)
}

// TestLogprobsMatchHTTP: the same greedy request over gRPC and over the
// OpenAI HTTP API gives, token for token, the same token, bytes, logprob
// and alternatives; the greedy token is the most likely one.
func TestLogprobsMatchHTTP(t *testing.T) {
	r := smolRig(t)
	const top = 3
	got := drainLogprobs(t, mustGenerate(t, r, &sluicev1.GenerateRequest{Input: chatInput("Name a color."), Sampling: greedy(12),
		Logprobs: true, TopLogprobs: top}))
	body := `{"messages":[{"role":"user","content":"Name a color."}],"temperature":0,"max_tokens":12,"logprobs":true,"top_logprobs":3,"stream":true}`
	resp, err := http.Post(httpFor(t, r)+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type entry struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	var want []struct {
		entry
		Top []entry `json:"top_logprobs"`
	}
	raw, _ := readAll(resp)
	for _, line := range strings.Split(raw, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Logprobs *struct {
					Content []struct {
						entry
						Top []entry `json:"top_logprobs"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if len(ch.Choices) == 1 && ch.Choices[0].Logprobs != nil {
			for _, c := range ch.Choices[0].Logprobs.Content {
				want = append(want, struct {
					entry
					Top []entry `json:"top_logprobs"`
				}{c.entry, c.Top})
			}
		}
	}
	if len(got) == 0 || len(got) != len(want) {
		t.Fatalf("gRPC gave %d logprobs, HTTP %d", len(got), len(want))
	}
	bytesEq := func(b []byte, ints []int) bool {
		wb := make([]byte, len(ints))
		for i, v := range ints {
			wb[i] = byte(v)
		}
		return string(b) == string(wb)
	}
	close := func(a float32, b float64) bool { return math.Abs(float64(a)-b) <= 1e-6*math.Max(1, math.Abs(b)) }
	for i, g := range got {
		w := want[i]
		if g.GetToken() != w.Token || !bytesEq(g.GetBytes(), w.Bytes) || !close(g.GetLogprob(), w.Logprob) || len(g.GetTopLogprobs()) != top || len(w.Top) != top {
			t.Fatalf("token %d: gRPC %v, HTTP %+v", i, g, w)
		}
		if g.GetTopLogprobs()[0].GetTokenId() != g.GetTokenId() || g.GetLogprob() != g.GetTopLogprobs()[0].GetLogprob() {
			t.Errorf("token %d: greedy chose %d, not the most likely %v", i, g.GetTokenId(), g.GetTopLogprobs()[0])
		}
		for j, a := range g.GetTopLogprobs() {
			if a.GetToken() != w.Top[j].Token || !bytesEq(a.GetBytes(), w.Top[j].Bytes) || !close(a.GetLogprob(), w.Top[j].Logprob) {
				t.Fatalf("token %d alternative %d: gRPC %v, HTTP %+v", i, j, a, w.Top[j])
			}
			if j > 0 && a.GetLogprob() > g.GetTopLogprobs()[j-1].GetLogprob() {
				t.Errorf("token %d: alternatives out of order: %v", i, g.GetTopLogprobs())
			}
		}
	}
}

// drainLogprobs reads a stream and checks each chunk's logprobs line up
// with its token ids.
func drainLogprobs(t *testing.T, call interface {
	Recv() (*sluicev1.GenerateResponse, error)
}) []*sluicev1.TokenLogprob {
	t.Helper()
	var lps []*sluicev1.TokenLogprob
	for {
		msg, err := call.Recv()
		if err != nil {
			if status.Code(err) != codes.OK && !strings.Contains(err.Error(), "EOF") {
				t.Fatalf("stream: %v", err)
			}
			return lps
		}
		ch := msg.GetChunk()
		if ch == nil {
			continue
		}
		if len(ch.GetLogprobs()) != len(ch.GetTokenIds()) {
			t.Fatalf("chunk with %d ids has %d logprobs", len(ch.GetTokenIds()), len(ch.GetLogprobs()))
		}
		for i, lp := range ch.GetLogprobs() {
			if lp.GetTokenId() != ch.GetTokenIds()[i] {
				t.Fatalf("logprob %d is of token %d, the chunk's id is %d", i, lp.GetTokenId(), ch.GetTokenIds()[i])
			}
		}
		lps = append(lps, ch.GetLogprobs()...)
	}
}

func mustGenerate(t *testing.T, r *rig, req *sluicev1.GenerateRequest) sluicev1.Inference_GenerateClient {
	t.Helper()
	call, err := r.client.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return call
}

func readAll(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
