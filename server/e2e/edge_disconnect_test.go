package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEdgeDisconnectFrees: a client that leaves a Messages or a Responses
// stream after its first text deltas ends the sequence, and its KV blocks
// are back in the pool, just as for chat (the adapters share Pump).
func TestEdgeDisconnectFrees(t *testing.T) {
	r := getRig(t)
	for _, tc := range []struct{ path, body, delta string }{
		{"/v1/messages", `{"max_tokens":400,"stream":true,"messages":[{"role":"user","content":"Write a long story about a lighthouse."}]}`,
			"event: content_block_delta"},
		{"/v1/responses", `{"max_output_tokens":400,"stream":true,"input":"Write a long story about a lighthouse."}`,
			"event: response.output_text.delta"},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "POST", r.url+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", tc.path, err, resp)
		}
		// Two deltas come from two steps, and the engine publishes its
		// figures between steps: after the second, they show the sequence
		// running (after the first they may still be those from before it
		// was admitted, when prefill and first token share one step).
		br := bufio.NewReader(resp.Body)
		for deltas := 0; deltas < 2; {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: fewer than two text deltas before %v", tc.path, err)
			}
			if strings.HasPrefix(line, tc.delta) {
				deltas++
			}
		}
		if s := r.stats(); s.Running+s.Waiting == 0 {
			rest := make([]byte, 4000)
			n, _ := br.Read(rest)
			t.Fatalf("%s: nothing running while the stream is open: %+v\n%s", tc.path, s, rest[:n])
		}
		cancel()
		resp.Body.Close()
		s := r.waitIdle(t, 5*time.Second)
		if s.KV.Used != 0 {
			t.Errorf("%s: KV %+v after the client left", tc.path, s.KV)
		}
	}
}
