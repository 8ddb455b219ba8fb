package responses

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

type fix struct {
	srv   *httptest.Server
	eng   *streamtest.ScriptEngine
	store *Store
}

func fixture(t *testing.T, pieces ...string) *fix {
	t.Helper()
	return fixtureWith(t, nil, pieces...)
}

// fixtureWith serves a tokenizer made from the vocabulary by wrap (nil: the
// vocabulary itself).
func fixtureWith(t *testing.T, wrap func(*streamtest.PieceVocab) stream.Tokenizer, pieces ...string) *fix {
	t.Helper()
	b, eng := streamtest.ScriptBackend(wrap, pieces...)
	env := streamtest.Env(b)
	env.WriteError = func(w http.ResponseWriter, err error) {
		c := stream.Classify(err)
		w.WriteHeader(c.HTTP)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": c.Code, "param": c.Param, "message": err.Error()}})
	}
	store := NewStore(8, 1<<20)
	h := New(env, store)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", h.Create)
	mux.HandleFunc("GET /v1/responses/{id}", h.Get)
	mux.HandleFunc("DELETE /v1/responses/{id}", h.Delete)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &fix{srv, eng, store}
}

func (f *fix) post(t *testing.T, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(f.srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type wireResp struct {
	ID                 string  `json:"id"`
	Status             string  `json:"status"`
	PreviousResponseID *string `json:"previous_response_id"`
	Output             []struct {
		Type    string
		Role    string
		Content []struct{ Type, Text string }
	}
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Usage             *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
}

func (f *fix) create(t *testing.T, body string) wireResp {
	t.Helper()
	resp := f.post(t, body)
	var r wireResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: status %d %v", body, resp.StatusCode, err)
	}
	return r
}

// TestStreamEvents checks the typed events in order, their increasing
// sequence numbers, the text in deltas equal to the done text and to the
// completed response's, and the response ids matching throughout.
func TestStreamEvents(t *testing.T) {
	f := fixture(t, "Hel", "lo", "!")
	resp := f.post(t, `{"input":"Hi","instructions":"Be kind.","stream":true,"max_output_tokens":10,"temperature":0.2}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var names []string
	var deltas, done string
	var final map[string]any
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") {
			name = strings.TrimPrefix(line, "event: ")
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(line[len("data: "):]), &d); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if d["type"] != name || d["sequence_number"] != float64(len(names)) {
			t.Errorf("event %d %s: %v", len(names), name, d)
		}
		names = append(names, name)
		switch name {
		case "response.output_text.delta":
			deltas += d["delta"].(string)
		case "response.output_text.done":
			done = d["text"].(string)
		case "response.completed":
			final = d["response"].(map[string]any)
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(slices.Compact(names), want) {
		t.Errorf("events %v", names)
	}
	if deltas != "Hello!" || done != deltas {
		t.Errorf("deltas %q done %q", deltas, done)
	}
	out := final["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	if final["status"] != "completed" || out["text"] != "Hello!" || final["instructions"] != "Be kind." || final["temperature"] != 0.2 {
		t.Errorf("final %v", final)
	}
	if p := streamtest.PromptText(f.eng.Submits()[0].Prompt); p != "<system>Be kind.\n<user>Hi\n<assistant>" {
		t.Errorf("prompt %q", p)
	}
}

// TestPreviousResponse: a stored response continues with its own output as
// the assistant's turn, without the earlier instructions; store false keeps
// nothing; GET returns a stored response and DELETE forgets it.
func TestPreviousResponse(t *testing.T) {
	f := fixture(t, "Par", "is")
	first := f.create(t, `{"input":[{"role":"user","content":[{"type":"input_text","text":"Capital?"}]}],"instructions":"Short."}`)
	if first.Output[0].Content[0].Text != "Paris" || first.Status != "completed" {
		t.Fatalf("first %+v", first)
	}
	second := f.create(t, fmt.Sprintf(`{"input":"And Spain?","previous_response_id":%q}`, first.ID))
	if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID {
		t.Errorf("second %+v", second)
	}
	p := streamtest.PromptText(f.eng.Submits()[1].Prompt)
	if p != "<user>Capital?\n<assistant>Paris\n<user>And Spain?\n<assistant>" {
		t.Errorf("continued prompt %q", p)
	}
	f.create(t, `{"input":"x","store":false}`)
	if n := f.store.Len(); n != 2 {
		t.Errorf("%d stored, want 2", n)
	}
	get, _ := http.Get(f.srv.URL + "/v1/responses/" + first.ID)
	var got wireResp
	_ = json.NewDecoder(get.Body).Decode(&got)
	get.Body.Close()
	if get.StatusCode != 200 || got.ID != first.ID || got.Output[0].Content[0].Text != "Paris" {
		t.Errorf("GET: %d %+v", get.StatusCode, got)
	}
	del, _ := http.NewRequest("DELETE", f.srv.URL+"/v1/responses/"+first.ID, nil)
	dr, _ := http.DefaultClient.Do(del)
	dr.Body.Close()
	resp := f.post(t, fmt.Sprintf(`{"input":"x","previous_response_id":%q}`, first.ID))
	var e struct{ Error struct{ Code, Param string } }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if dr.StatusCode != 200 || resp.StatusCode != 400 || e.Error.Param != "previous_response_id" {
		t.Errorf("after DELETE (%d): %d %+v", dr.StatusCode, resp.StatusCode, e)
	}
}

// TestIncomplete: max_output_tokens reached is status incomplete, reason max_output_tokens.
func TestIncomplete(t *testing.T) {
	f := fixture(t, "a", "b")
	f.eng.Finish = engine.FinishLength
	r := f.create(t, `{"input":"x","max_output_tokens":2}`)
	if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 2 {
		t.Errorf("%+v", r)
	}
}

// TestRefused: every field Sluice cannot honour is refused, naming it.
func TestRefused(t *testing.T) {
	f := fixture(t, "x")
	for body, param := range map[string]string{
		`{"input":"x","tools":[{"type":"function","name":"f"}]}`:                                              "tools",
		`{"input":"x","tool_choice":"required"}`:                                                              "tool_choice",
		`{"input":"x","reasoning":{"effort":"extreme"}}`:                                                      "reasoning.effort",
		`{"input":"x","reasoning":{"summary":"long"}}`:                                                        "reasoning.summary",
		`{"input":"x","include":["bogus"]}`:                                                                   "include",
		`{"input":"x","text":{"format":{"type":"json_object"}}}`:                                              "text.format",
		`{"input":"x","background":true}`:                                                                     "background",
		`{"input":"x","truncation":"auto"}`:                                                                   "truncation",
		`{"input":"x","include":["message.output_text.logprobs"]}`:                                            "include",
		`{"input":"x","top_logprobs":3}`:                                                                      "top_logprobs",
		`{"input":[{"type":"function_call_output","call_id":"c"}]}`:                                           "input[0].output",
		`{"input":[{"type":"function_call_output","call_id":"c","output":"1"}]}`:                              "input[0].call_id",
		`{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`:                                    "input[0].call_id",
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{x"}]}`:                      "input[0].arguments",
		`{"input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`:                                 "input[0].name",
		`{"input":[{"type":"computer_call","call_id":"c"}]}`:                                                  "input[0].type",
		`{"input":"x","tools":[{"type":"hologram"}]}`:                                                         "tools[0].type",
		`{"input":"x","tools":[{"type":"namespace","tools":[]}]}`:                                             "tools[0].name",
		`{"input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]}`:             "tools[0].tools[0].type",
		`{"input":"x","tools":[{"type":"function","name":"bad name"}]}`:                                       "tools[0].name",
		`{"input":"x","tools":[{"type":"function","name":"f","parameters":[]}]}`:                              "tools[0].parameters",
		`{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`: "tool_choice.name",
		`{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools"}}`:       "tool_choice.type",
		`{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":"sometimes"}`:                    "tool_choice",
		`{"input":"x","text":{"format":{"type":"json_schema","schema":{}}}}`:                                  "text.format.name",
		`{"input":"x","text":{"format":{"type":"xml"}}}`:                                                      "text.format.type",
		`{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{},"bogus":1}}}`:             "text.format",
		`{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`:                                      "input[0].content[0].type",
		`{"input":"x","conversation":"conv_1"}`:                                                               "conversation",
		`{"input":"x","prompt":{"id":"p"}}`:                                                                   "prompt",
		`{"input":"x","max_output_tokens":0}`:                                                                 "max_output_tokens",
		`{"input":[{"role":"robot","content":"x"}]}`:                                                          "input[0].role",
		`{"input":"x","temperature":3}`:                                                                       "temperature",
		`{}`:                                                                                                  "input",
		`{"input":"x","previous_response_id":"resp_nope"}`:                                                    "previous_response_id",
		`{"input":"x","stream_options":{"include_obfuscation":true}}`:                                         "stream_options.include_obfuscation",
		`{"input":"x","text":{"format":{"type":"text"},"verbosity":"high"}}`:                                  "text.verbosity",
	} {
		resp := f.post(t, body)
		var e struct{ Error struct{ Code, Param string } }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 400 || e.Error.Param != param {
			t.Errorf("%s: %d %+v, want param %s", body, resp.StatusCode, e, param)
		}
	}
	if n := len(f.eng.Submits()); n != 0 {
		t.Errorf("%d refused requests reached the engine", n)
	}
	// What is vacuous or automatic here is accepted.
	f.create(t, `{"input":"x","tool_choice":"none","tools":[],"parallel_tool_calls":false,"prompt_cache_key":"k","text":{"format":{"type":"text"},"verbosity":"medium"},"truncation":"disabled","service_tier":"auto","metadata":{"a":"b"}}`)
}

// TestStoreBounds: the store keeps at most its count and bytes, oldest first out.
func TestStoreBounds(t *testing.T) {
	s := NewStore(2, 1000)
	conv := []stream.ChatMessage{{Role: "user", Content: "hi"}}
	s.put("", "a", []byte("{}"), conv)
	s.put("", "b", []byte("{}"), conv)
	s.get("", "a") // a is now the most recent
	s.put("", "c", []byte("{}"), conv)
	if _, ok := s.get("", "b"); ok || s.Len() != 2 {
		t.Errorf("b kept (len %d)", s.Len())
	}
	s.put("", "big", make([]byte, 900), conv)
	if _, ok := s.get("", "a"); ok {
		t.Errorf("a kept past the byte budget")
	}
	s.put("", "huge", make([]byte, 2000), conv)
	if _, ok := s.get("", "huge"); ok {
		t.Errorf("a response over the whole budget was kept")
	}
	if _, ok := s.get("", "big"); !ok {
		t.Errorf("big evicted by a response that was never kept")
	}
}

// TestStoreTenants: a response is its tenant's alone: another tenant's get,
// history and delete find nothing, and the owner's still do.
func TestStoreTenants(t *testing.T) {
	s := NewStore(8, 1000)
	conv := []stream.ChatMessage{{Role: "user", Content: "hi"}}
	s.put("key-a", "resp_1", []byte("{}"), conv)
	if _, ok := s.get("key-b", "resp_1"); ok {
		t.Error("tenant b got a's response")
	}
	if _, ok := s.get("", "resp_1"); ok {
		t.Error("tenant \"\" got a's response")
	}
	if _, ok := s.history("key-b")("resp_1"); ok {
		t.Error("tenant b continued a's response")
	}
	if s.delete("key-b", "resp_1") || s.Len() != 1 {
		t.Error("tenant b deleted a's response")
	}
	if got, ok := s.history("key-a")("resp_1"); !ok || len(got) != 1 {
		t.Errorf("a's own history: %v %v", got, ok)
	}
	if !s.delete("key-a", "resp_1") || s.Len() != 0 {
		t.Error("a could not delete its response")
	}
}
