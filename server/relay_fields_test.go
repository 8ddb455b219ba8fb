package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestRelayForwardsUnknownFields: in relay mode a field this server does
// not know is neither refused nor dropped: the upstream gets it in the body
// and decides (a provider's own extension, such as llama-server's
// n_probs, works through the relay as it does directly).
func TestRelayForwardsUnknownFields(t *testing.T) {
	var mu sync.Mutex
	var got map[string]json.RawMessage
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"object":"list","data":[{"id":"`+testModel+`","object":"model"}]}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		_ = json.Unmarshal(b, &got)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	front := serveRelay(t, up.URL)

	resp := ssetest.Post(t, front+"/v1/chat/completions", `{"model":"`+testModel+`","messages":[{"role":"user","content":"hi"}],"n_probs":3}`)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"hi"`) {
		t.Fatalf("%d %s, want 200 with the upstream's reply", resp.StatusCode, raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(got["n_probs"]) != "3" {
		t.Errorf("the upstream got n_probs %s, want 3", got["n_probs"])
	}
}
