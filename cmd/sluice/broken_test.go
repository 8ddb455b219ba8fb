package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine/faultinject"
)

// What a client of each API sees when the step running its request panics:
// streamed, the stream's own in-band error (type server_error, code
// step_failed; Anthropic's api_error) and a proper end; whole, a 500 in its
// API's error shape. Neither carries the panic's value or stack (the server's
// log has them). Every request's blocks return to the pool, and every
// failure is counted.
func TestStepPanicOnEveryEndpoint(t *testing.T) {
	needModel(t)
	// Requests run one at a time and each needs more than 3 steps (a prefill
	// and max_tokens decodes), so every one meets a panicking step.
	m, _, _, url := faultyServer(t, faultinject.Every(3, faultinject.Fault{Kind: faultinject.Panic}))

	const prompt = "Count from one to fifty."
	msgs := fmt.Sprintf(`"messages":[{"role":"user","content":%q}]`, prompt)
	cases := []struct {
		name, path, body string
		stream           bool
		// streamed: the in-band error's event (its data holds want); whole:
		// the body of the 500 must hold want
		want string
	}{
		{"chat", "/v1/chat/completions", `{` + msgs + `,"max_tokens":24}`, false, `"code":"step_failed"`},
		{"chat stream", "/v1/chat/completions", `{` + msgs + `,"max_tokens":24,"stream":true}`, true, `"code":"step_failed"`},
		{"completions", "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":24}`, prompt), false, `"code":"step_failed"`},
		{"completions stream", "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":24,"stream":true}`, prompt), true, `"code":"step_failed"`},
		{"messages", "/v1/messages", fmt.Sprintf(`{"model":%q,`, m.ID) + msgs + `,"max_tokens":24}`, false, `"type":"api_error"`},
		{"messages stream", "/v1/messages", fmt.Sprintf(`{"model":%q,`, m.ID) + msgs + `,"max_tokens":24,"stream":true}`, true, `"type":"api_error"`},
		{"responses", "/v1/responses", fmt.Sprintf(`{"input":%q,"max_output_tokens":24,"store":false}`, prompt), false, `"code":"step_failed"`},
		{"responses stream", "/v1/responses", fmt.Sprintf(`{"input":%q,"max_output_tokens":24,"store":false,"stream":true}`, prompt), true, `"code":"step_failed"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			body := string(raw)
			for _, leak := range []string{"injected panic", "goroutine ", ".go:"} {
				if strings.Contains(body, leak) {
					t.Errorf("the client sees the panic's insides (%q):\n%s", leak, body)
				}
			}
			if !tc.stream {
				if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, tc.want) ||
					!strings.Contains(body, `"server_error"`) && !strings.Contains(body, `"api_error"`) || !json.Valid(raw) {
					t.Fatalf("status %d, want 500 with %s:\n%s", resp.StatusCode, tc.want, body)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d:\n%s", resp.StatusCode, body)
			}
			end := streamEnd(tc.path)
			errAt, endAt := -1, -1
			events := strings.Split(strings.TrimSpace(body), "\n\n")
			for i, ev := range events {
				if strings.Contains(ev, tc.want) {
					errAt = i
				}
				if strings.Contains(ev, end) {
					endAt = i
				}
			}
			if errAt < 0 || endAt != len(events)-1 || errAt > endAt {
				t.Fatalf("no in-band %s followed by %q as the last event:\n%s", tc.want, end, body)
			}
			if tc.path != "/v1/messages" && !strings.Contains(events[errAt], `"server_error"`) && tc.path != "/v1/responses" {
				t.Errorf("in-band error is not a server_error: %s", events[errAt])
			}
		})
	}
	// The loop publishes its stats after each step; the last request's end
	// and the blocks' return are in the same step.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := m.Engine.Stats()
		if st.Running == 0 && st.Waiting == 0 && st.KV.Used == 0 {
			if st.StepFailures < int64(len(cases)) {
				t.Errorf("%d step failures counted, want at least %d", st.StepFailures, len(cases))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failed steps: %d running, %d waiting, %d KV blocks used", st.Running, st.Waiting, st.KV.Used)
		}
		time.Sleep(20 * time.Millisecond) // the loop's stats are a snapshot: polled, no event to wait on
	}
}

// streamEnd is what the last event of a stream that failed holds, per API.
func streamEnd(path string) string {
	switch path {
	case "/v1/messages":
		return "event: error"
	case "/v1/responses":
		return "event: response.failed"
	}
	return "data: [DONE]"
}
