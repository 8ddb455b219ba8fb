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

// answerResponses is a Responses upstream that answers every request with
// the text reply, completed, usage 7 in / 2 out.
func answerResponses(reply string) func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
	return func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		responsesShape.start(w)
		for _, piece := range strings.SplitAfter(reply, " ") {
			responsesShape.text(w, piece)
		}
		responsesEvent(w, "response.completed", `,"response":{"id":"resp_up","status":"completed","usage":{"input_tokens":7,"output_tokens":2,"total_tokens":9}}`)
	}
}

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d %q", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func outputText(resp map[string]any) string {
	var b strings.Builder
	out, _ := resp["output"].([]any)
	for _, it := range out {
		content, _ := it.(map[string]any)["content"].([]any)
		for _, c := range content {
			b.WriteString(fmt.Sprint(c.(map[string]any)["text"]))
		}
	}
	return b.String()
}

// TestRelayResponsesStore: relayed responses are kept in the relay's own
// store under the ids its clients see: GET and DELETE /v1/responses/{id}
// answer from it, previous_response_id goes upstream as the stored
// conversation expanded into input items (never as the id, which the
// upstream does not know, and the upstream is asked to store nothing),
// store false keeps a response out, and GET ?stream=true&starting_after=N
// replays a relayed stream from this server's log.
func TestRelayResponsesStore(t *testing.T) {
	leakCheck(t)
	up := newFake(t, answerResponses("Paris is the capital."))
	rig := newRelay(t, up, fast)

	// A streamed response, then the same by id.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rig.url+"/v1/responses",
		strings.NewReader(`{"model":"m","input":"Capital of France?","instructions":"Be brief.","stream":true}`))
	first := readShape(t, req, 0)
	if first.status != http.StatusOK || len(first.evs) < 5 {
		t.Fatalf("stream: %d %s, %d events", first.status, first.raw, len(first.evs))
	}
	if res := responsesShape.read(t, first.evs); res.text != "Paris is the capital." || res.finish != "completed" {
		t.Fatalf("stream: %+v", res)
	}
	id := first.streamID
	sent := <-up.bodies
	if sent["store"] != false || sent["input"] != "Capital of France?" || sent["instructions"] != "Be brief." {
		t.Errorf("upstream body %v: the client's input and instructions as written, store false", sent)
	}
	status, got := call(t, http.MethodGet, rig.url+"/v1/responses/"+id, "")
	if status != http.StatusOK || got["id"] != id || got["status"] != "completed" || got["store"] != true || outputText(got) != "Paris is the capital." {
		t.Fatalf("GET %s: %d %v", id, status, got)
	}
	if u, _ := got["usage"].(map[string]any); u["input_tokens"] != 7.0 || u["output_tokens"] != 2.0 {
		t.Errorf("stored usage %v, want the upstream's 7/2", got["usage"])
	}

	// previous_response_id: the conversation goes upstream as items, twice over.
	status, second := call(t, http.MethodPost, rig.url+"/v1/responses",
		fmt.Sprintf(`{"model":"m","input":"And of Spain?","previous_response_id":%q}`, id))
	if status != http.StatusOK || second["previous_response_id"] != id || outputText(second) != "Paris is the capital." {
		t.Fatalf("continued: %d %v", status, second)
	}
	item := func(role, text string) map[string]any {
		return map[string]any{"type": "message", "role": role, "content": text}
	}
	want := []any{item("user", "Capital of France?"), item("assistant", "Paris is the capital."), item("user", "And of Spain?")}
	sent = <-up.bodies
	if _, ok := sent["previous_response_id"]; ok || !reflect.DeepEqual(sent["input"], want) || sent["instructions"] != nil {
		t.Errorf("upstream body %v\nwant input %v, no previous_response_id, no instructions (they are not carried over)", sent, want)
	}
	status, third := call(t, http.MethodPost, rig.url+"/v1/responses",
		fmt.Sprintf(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"And Italy?"}]}],"previous_response_id":%q}`, second["id"]))
	if status != http.StatusOK {
		t.Fatalf("third: %d %v", status, third)
	}
	want = append(want, item("assistant", "Paris is the capital."), item("user", "And Italy?"))
	if sent = <-up.bodies; !reflect.DeepEqual(sent["input"], want) {
		t.Errorf("third turn's input %v, want %v", sent["input"], want)
	}

	// A tool round trip in the stored conversation goes upstream as its items.
	status, tooled := call(t, http.MethodPost, rig.url+"/v1/responses", `{"model":"m","input":[
		{"role":"user","content":"Weather in Paris?"},
		{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_1","output":"sunny"}]}`)
	if status != http.StatusOK {
		t.Fatalf("tool round trip: %d %v", status, tooled)
	}
	<-up.bodies
	if status, e := call(t, http.MethodPost, rig.url+"/v1/responses", fmt.Sprintf(`{"model":"m","input":"Thanks","previous_response_id":%q}`, tooled["id"])); status != http.StatusOK {
		t.Fatalf("continuing the tool round trip: %d %v", status, e)
	}
	want = []any{item("user", "Weather in Paris?"),
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": `{"city":"Paris"}`},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
		item("assistant", "Paris is the capital."), item("user", "Thanks")}
	if sent = <-up.bodies; !reflect.DeepEqual(sent["input"], want) {
		t.Errorf("the tool round trip's continuation sent %v\nwant %v", sent["input"], want)
	}

	// store false: answered, not kept, and not continuable.
	status, unstored := call(t, http.MethodPost, rig.url+"/v1/responses", `{"model":"m","input":"hi","store":false}`)
	if status != http.StatusOK || unstored["store"] != false {
		t.Fatalf("store false: %d %v", status, unstored)
	}
	<-up.bodies
	if status, e := call(t, http.MethodGet, rig.url+"/v1/responses/"+fmt.Sprint(unstored["id"]), ""); status != http.StatusNotFound {
		t.Errorf("GET a store-false response: %d %v", status, e)
	}
	before := up.requests.Load()
	for _, prev := range []string{fmt.Sprint(unstored["id"]), "resp_never"} {
		status, e := call(t, http.MethodPost, rig.url+"/v1/responses", fmt.Sprintf(`{"model":"m","input":"hi","previous_response_id":%q}`, prev))
		if er, _ := e["error"].(map[string]any); status != http.StatusBadRequest || er["param"] != "previous_response_id" {
			t.Errorf("previous_response_id %s: %d %v", prev, status, e)
		}
	}
	if n := up.requests.Load(); n != before {
		t.Errorf("%d upstream requests for refused continuations", n-before)
	}

	// The stream again, after sequence number 3: the same events from 4 on.
	again, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, rig.url+"/v1/responses/"+id+"?stream=true&starting_after=3", nil)
	rest := readShape(t, again, 0)
	if rest.status != http.StatusOK || !reflect.DeepEqual(rest.evs, first.evs[4:]) {
		t.Errorf("GET ?stream=true&starting_after=3: %d %s\n%v\nwant %v", rest.status, rest.raw, rest.evs, first.evs[4:])
	}
	for _, q := range []string{"?stream=true&starting_after=x", "?stream=true&starting_after=-1"} {
		if status, e := call(t, http.MethodGet, rig.url+"/v1/responses/"+id+q, ""); status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %v", q, status, e)
		}
	}
	if status, e := call(t, http.MethodGet, rig.url+"/v1/responses/resp_never?stream=true", ""); status != http.StatusNotFound {
		t.Errorf("GET an unknown stream: %d %v", status, e)
	}

	// DELETE, then it is gone.
	status, del := call(t, http.MethodDelete, rig.url+"/v1/responses/"+id, "")
	if status != http.StatusOK || del["deleted"] != true || del["id"] != id {
		t.Errorf("DELETE: %d %v", status, del)
	}
	if status, _ := call(t, http.MethodGet, rig.url+"/v1/responses/"+id, ""); status != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d", status)
	}
	if status, _ := call(t, http.MethodDelete, rig.url+"/v1/responses/"+id, ""); status != http.StatusNotFound {
		t.Errorf("DELETE twice: %d", status)
	}
}
