package anthropic

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// fixture serves the handler over a ScriptEngine producing pieces.
func fixture(t *testing.T, pieces ...string) (*httptest.Server, *streamtest.ScriptEngine) {
	t.Helper()
	return fixtureWith(t, nil, pieces...)
}

// fixtureWith serves a tokenizer made from the vocabulary by wrap (nil: the
// vocabulary itself).
func fixtureWith(t *testing.T, wrap func(*streamtest.PieceVocab) stream.Tokenizer, pieces ...string) (*httptest.Server, *streamtest.ScriptEngine) {
	t.Helper()
	b, eng := streamtest.ScriptBackend(wrap, pieces...)
	env := streamtest.Env(b)
	h := New(env)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", h.Messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", h.CountTokens)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, eng
}

func post(t *testing.T, srv *httptest.Server, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type event struct {
	name string
	data map[string]any
}

func readEvents(t *testing.T, resp *http.Response) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: data %q: %v", name, line, err)
			}
			if d["type"] != name {
				t.Errorf("event %s carries type %v", name, d["type"])
			}
			evs = append(evs, event{name, d})
		}
	}
	return evs
}

// TestStreamEvents checks the whole event sequence of a stream cut by a stop
// sequence: the text before it in text_delta events, stop_reason
// stop_sequence naming it, usage, message_stop last, the sequence aborted.
func TestStreamEvents(t *testing.T) {
	// The tokens after the stop sequence come slowly: the abort must end the
	// sequence long before its script does.
	script := append([]string{"Hel", "lo", " wor", "ld", "!"}, slices.Repeat([]string{" more"}, 100)...)
	srv, eng := fixture(t, script...)
	eng.Interval = 10 * time.Millisecond
	resp := post(t, srv, "/v1/messages", `{"model":"smol","max_tokens":32,"stream":true,"system":"Be brief.",
		"stop_sequences":["ld!","zzz"],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %v", resp.StatusCode, resp.Header)
	}
	evs := readEvents(t, resp)
	var names []string
	var text strings.Builder
	for _, e := range evs {
		names = append(names, e.name)
		if e.name == "content_block_delta" {
			d := e.data["delta"].(map[string]any)
			if d["type"] != "text_delta" {
				t.Errorf("delta %v", d)
			}
			text.WriteString(d["text"].(string))
		}
	}
	names = slices.Compact(names)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names, want) {
		t.Errorf("events %v, want %v", names, want)
	}
	if text.String() != "Hello wor" {
		t.Errorf("text %q, want %q", text.String(), "Hello wor")
	}
	start := evs[0].data["message"].(map[string]any)
	if start["model"] != "smol" || start["role"] != "assistant" || !strings.HasPrefix(start["id"].(string), "msg_") {
		t.Errorf("message_start %v", start)
	}
	md := evs[len(evs)-2].data
	delta := md["delta"].(map[string]any)
	if delta["stop_reason"] != "stop_sequence" || delta["stop_sequence"] != "ld!" {
		t.Errorf("message_delta %v", md)
	}
	if u := md["usage"].(map[string]any); u["output_tokens"] != float64(5) {
		t.Errorf("usage %v, want 5 output tokens", u)
	}
	sub := eng.Submits()
	if len(sub) != 1 || sub[0].MaxTokens != 32 || !strings.HasPrefix(streamtest.PromptText(sub[0].Prompt), "<system>Be brief.\n<user>Hi\n") {
		t.Errorf("submitted %+v", sub)
	}
	if a := eng.Aborts(); !slices.Equal(a, []engine.AbortCause{engine.CauseStopString}) {
		t.Errorf("aborts %v", a)
	}
}

// TestWhole checks the non-streaming message: one text block, end_turn
// when the model ends its turn, max_tokens when the limit does.
func TestWhole(t *testing.T) {
	for _, tc := range []struct {
		finish engine.FinishReason
		reason string
	}{{engine.FinishStop, "end_turn"}, {engine.FinishLength, "max_tokens"}} {
		srv, eng := fixture(t, "Par", "is")
		eng.Finish = tc.finish
		resp := post(t, srv, "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":"Capital?"}],"temperature":0.5,"top_k":3}`)
		var m struct {
			Type       string `json:"type"`
			Model      string `json:"model"`
			StopReason string `json:"stop_reason"`
			Content    []struct{ Type, Text string }
			Usage      struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		if m.Type != "message" || m.Model != "smol" || m.StopReason != tc.reason || len(m.Content) != 1 ||
			m.Content[0].Text != "Paris" || m.Usage.OutputTokens != 2 || m.Usage.InputTokens != len("<user>Capital?\n<assistant>") {
			t.Errorf("%s: %+v", tc.finish, m)
		}
		sp := eng.Submits()[0].Sampling
		if sp.Temperature != 0.5 || sp.TopK != 3 {
			t.Errorf("sampling %+v", sp)
		}
	}
}

// TestErrors checks Anthropic's error shape and that every field Sluice
// cannot honour is refused, naming it, rather than ignored.
func TestErrors(t *testing.T) {
	srv, eng := fixture(t, "x")
	msg := `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct {
		body      string
		status    int
		typ, code string
		param     string
	}{
		{`{` + msg + `}`, 400, "invalid_request_error", "invalid_value", "max_tokens"},
		{`{"max_tokens":0,` + msg + `}`, 400, "invalid_request_error", "invalid_value", "max_tokens"},
		{`{"max_tokens":5,"temperature":1.5,` + msg + `}`, 400, "invalid_request_error", "invalid_value", "temperature"},
		{`{"max_tokens":5,"top_k":0,` + msg + `}`, 400, "invalid_request_error", "invalid_value", "top_k"},
		{`{"max_tokens":5,"model":"gpt-9",` + msg + `}`, 404, "not_found_error", "model_not_found", ""},
		{`{"max_tokens":5,"tools":[{"name":"f"}],` + msg + `}`, 400, "invalid_request_error", "invalid_value", "tools[0].input_schema"},
		{`{"max_tokens":5,"tools":[{"name":"f","input_schema":{}},{"type":"bash_20250124","name":"bash"}],` + msg + `}`, 400, "invalid_request_error", "unsupported_parameter", "tools[1].type"},
		{`{"max_tokens":5,"tools":[{"name":"bad name","input_schema":{}}],` + msg + `}`, 400, "invalid_request_error", "invalid_value", "tools[0].name"},
		{`{"max_tokens":5,"tools":[{"name":"f","input_schema":[]}],` + msg + `}`, 400, "invalid_request_error", "invalid_value", "tools[0].input_schema"},
		{`{"max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "tool_choice.name"},
		{`{"max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"sometimes"},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "tool_choice.type"},
		{`{"max_tokens":5,"tool_choice":{"type":"any"},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "tool_choice"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, 400, "invalid_request_error", "invalid_value", "messages[0].content[0].type"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]},{"role":"user","content":"b"}]}`, 400, "invalid_request_error", "invalid_value", "messages[1].content[0].input"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]},{"role":"user","content":"b"}]}`, 400, "invalid_request_error", "invalid_value", "messages[1].content[0].name"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, 400, "invalid_request_error", "invalid_value", "messages[0].content[0].tool_use_id"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"b"},{"type":"tool_result","tool_use_id":"t2","content":"x"}]}]}`, 400, "invalid_request_error", "invalid_value", "messages[2].content[1].tool_use_id"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}]}`, 400, "invalid_request_error", "unsupported_parameter", "messages[2].content[0].content[0].type"},
		{`{"max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "thinking.budget_tokens"},
		{`{"max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":10},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "thinking.budget_tokens"},
		{`{"max_tokens":5,"thinking":{"type":"sometimes"},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "thinking.type"},
		{`{"max_tokens":5,"thinking":{"type":"adaptive","display":"loud"},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "thinking.display"},
		{`{"max_tokens":5,"output_config":{"effort":"extreme"},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "output_config.effort"},
		{`{"max_tokens":5,"context_management":{"edits":[{"type":"clear_everything"}]},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "context_management.edits[0].type"},
		{`{"max_tokens":5,"context_management":{"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"turns","value":1}}]},` + msg + `}`, 400, "invalid_request_error", "invalid_value", "context_management.edits[0].keep.type"},
		{`{"max_tokens":5,"messages":[{"role":"tool","content":"a"}]}`, 400, "invalid_request_error", "invalid_value", "messages[0].role"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, 400, "invalid_request_error", "unsupported_parameter", "messages[0].content[0].type"},
		{`{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, 400, "invalid_request_error", "unsupported_parameter", "messages[1].role"},
		{`{"max_tokens":5,"messages":[{"role":"system","content":"a"}]}`, 400, "invalid_request_error", "invalid_value", "messages"},
		{`{"max_tokens":5,"output_config":{"format":{"type":"json_schema"}},` + msg + `}`, 400, "invalid_request_error", "unsupported_parameter", "output_config.format"},
		{`{"max_tokens":5,"speed":"fast",` + msg + `}`, 400, "invalid_request_error", "unsupported_parameter", "speed"},
		{`{"max_tokens":5,"inference_geo":"eu",` + msg + `}`, 400, "invalid_request_error", "unsupported_parameter", "inference_geo"},
		{`{"max_tokens":"many",` + msg + `}`, 400, "invalid_request_error", "invalid_value", "max_tokens"},
		{`{"max_tokens":5,"stop_sequences":[""],` + msg + `}`, 400, "invalid_request_error", "invalid_value", "stop_sequences"},
	} {
		resp := post(t, srv, "/v1/messages", tc.body)
		var e struct {
			Type  string
			Error struct{ Type, Message, Code, Param string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if resp.StatusCode != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Code != tc.code ||
			e.Error.Param != tc.param || e.Error.Message == "" {
			t.Errorf("%s: %d %+v", tc.body, resp.StatusCode, e)
		}
	}
	if n := len(eng.Submits()); n != 0 {
		t.Errorf("%d refused requests reached the engine", n)
	}
}

// TestQueueFull: backpressure is Anthropic's 429 rate_limit_error.
func TestQueueFull(t *testing.T) {
	srv, eng := fixture(t, "x")
	eng.Fail = engine.ErrQueueFull
	resp := post(t, srv, "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`)
	var e struct{ Error struct{ Type string } }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != 429 || e.Error.Type != "rate_limit_error" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("%d %+v %v", resp.StatusCode, e, resp.Header)
	}
}

// TestCountTokens: the prompt's length after the chat template.
func TestCountTokens(t *testing.T) {
	srv, _ := fixture(t, "x")
	resp := post(t, srv, "/v1/messages/count_tokens", `{"model":"smol","system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":"Hi"}]}`)
	var c struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.InputTokens != len("<system>S\n<user>Hi\n<assistant>") {
		t.Errorf("status %d %+v %v", resp.StatusCode, c, err)
	}
}
