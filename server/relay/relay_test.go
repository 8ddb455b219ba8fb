package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/relay"
)

var fast = relay.Upstream{Timeouts: relay.Timeouts{Connect: time.Second, FirstByte: 300 * time.Millisecond, Stall: 300 * time.Millisecond}, Retries: -1}

// slowStall leaves a loaded machine room: the drip's pauses must stay under it.
var slowStall = relay.Upstream{Timeouts: relay.Timeouts{Connect: time.Second, FirstByte: time.Second, Stall: 2 * time.Second}, Retries: -1}

func withRetries(u relay.Upstream, n int) relay.Upstream { u.Retries = n; return u }

func errCode(r sseResult) string {
	if r.err == nil {
		return ""
	}
	c, _ := r.err["code"].(string)
	return c
}

func TestRelayFaults(t *testing.T) {
	tests := []struct {
		name     string
		up       relay.Upstream
		script   func(w http.ResponseWriter, r *http.Request, f *fakeUpstream)
		requests int64 // upstream requests the relay must have made
		check    func(t *testing.T, res sseResult, rig *relayRig)
	}{
		{
			name: "a clean stream passes through with usage", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				chunk(w, 2, "Hel")
				chunk(w, 3, "lo")
				finish(w, "length")
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "Hello" || res.finish != "length" || !res.done || res.usage["completion_tokens"] != 3.0 {
					t.Errorf("got %+v", res)
				}
				body := <-rig.up.bodies
				if body["stream"] != true || body["stream_options"].(map[string]any)["include_usage"] != true {
					t.Errorf("upstream body %v: stream and include_usage must be asked for", body)
				}
			},
		},
		{
			name: "no byte before the first-byte timeout: retried, then a 504", up: withRetries(fast, 1), requests: 2,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) { f.waitGone(r) },
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.status != http.StatusGatewayTimeout || !strings.Contains(res.body, "upstream_timeout") {
					t.Errorf("status %d body %s", res.status, res.body)
				}
				if got := counter(t, rig.reg, "sluice_relay_upstream_errors_total", "kind", relay.KindTimeout); got != 2 {
					t.Errorf("timeout errors %v, want 2", got)
				}
				if got := counter(t, rig.reg, "sluice_relay_retries_total"); got != 1 {
					t.Errorf("retries %v, want 1", got)
				}
			},
		},
		{
			name: "headers then silence: an in-band stall after nothing", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				f.waitGone(r)
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.status != 200 || errCode(res) != "stall_timeout" || !res.done || res.text != "" {
					t.Errorf("got %+v", res)
				}
				awaitGone(t, rig.up) // the relay closed the upstream
			},
		},
		{
			name: "a stall mid-stream ends the client's stream in-band and closes the upstream", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				chunk(w, 2, "partial")
				f.waitGone(r)
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "partial" || errCode(res) != "stall_timeout" || !res.done {
					t.Errorf("got %+v", res)
				}
				awaitGone(t, rig.up)
				if got := counter(t, rig.reg, "sluice_relay_upstream_errors_total", "kind", relay.KindStall); got != 1 {
					t.Errorf("stall errors %v", got)
				}
			},
		},
		{
			name: "a slow drip under the stall timeout: keep-alives, the whole text", up: slowStall, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				for i, s := range []string{"a", "b", "c"} {
					time.Sleep(200 * time.Millisecond) // the fault itself: an upstream pausing between tokens
					chunk(w, i+2, s)
				}
				finish(w, "stop")
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "abc" || res.finish != "stop" || res.err != nil || res.keepAlives < 3 {
					t.Errorf("got %+v, want the text and a keep-alive in each pause", res)
				}
			},
		},
		{
			name: "one event dripped byte by byte is assembled", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				for _, b := range []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\u00e9t\\u00e9\"}}]}\n\n") {
					_, _ = w.Write([]byte{b})
					w.(http.Flusher).Flush()
				}
				finish(w, "stop")
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "été" || !res.done || res.err != nil {
					t.Errorf("got %+v", res)
				}
			},
		},
		{
			name: "a truncated stream (no [DONE]) is an in-band error, counted", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				chunk(w, 2, "cut")
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "cut" || errCode(res) != "upstream_truncated" || !res.done {
					t.Errorf("got %+v", res)
				}
				if got := counter(t, rig.reg, "sluice_relay_upstream_truncated_total"); got != 1 {
					t.Errorf("truncations %v", got)
				}
			},
		},
		{
			name: "a malformed chunk is an in-band error and closes the upstream", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				chunk(w, 2, "ok")
				_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":\n\n"))
				w.(http.Flusher).Flush()
				f.waitGone(r)
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "ok" || errCode(res) != "upstream_malformed" || !res.done {
					t.Errorf("got %+v", res)
				}
				awaitGone(t, rig.up)
				if got := counter(t, rig.reg, "sluice_relay_upstream_errors_total", "kind", relay.KindMalformed); got != 1 {
					t.Errorf("malformed %v", got)
				}
			},
		},
		{
			name: "an upstream error mid-stream (its 5xx after the first byte) is in-band", up: fast, requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sseStart(w)
				chunk(w, 2, "so far")
				_, _ = w.Write([]byte(`data: {"error":{"message":"CUDA out of memory","type":"server_error","code":500}}` + "\n\n"))
				w.(http.Flusher).Flush()
				f.waitGone(r)
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "so far" || errCode(res) != "upstream_error" || !strings.Contains(res.err["message"].(string), "CUDA out of memory") {
					t.Errorf("got %+v", res)
				}
			},
		},
		{
			name: "503 before the first byte is retried; the retry streams", up: withRetries(fast, 2), requests: 2,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				if f.requests.Load() == 1 {
					http.Error(w, `{"error":{"message":"warming up"}}`, http.StatusServiceUnavailable)
					return
				}
				sseStart(w)
				chunk(w, 2, "second try")
				finish(w, "stop")
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.text != "second try" || !res.done || res.err != nil {
					t.Errorf("got %+v", res)
				}
			},
		},
		{
			name: "500 before the first byte is not retried: 502 naming the upstream's message", up: withRetries(fast, 2), requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				http.Error(w, `{"error":{"message":"model crashed"}}`, http.StatusInternalServerError)
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.status != http.StatusBadGateway || !strings.Contains(res.body, "model crashed") || !strings.Contains(res.body, "upstream_unavailable") {
					t.Errorf("status %d body %s", res.status, res.body)
				}
				if got := counter(t, rig.reg, "sluice_relay_upstream_errors_total", "kind", relay.KindStatus5xx); got != 1 {
					t.Errorf("5xx %v", got)
				}
			},
		},
		{
			name: "the upstream's 400 reaches the client as it said it", up: withRetries(fast, 2), requests: 1,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":{"message":"temperature too hot","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`))
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.status != http.StatusBadRequest || !strings.Contains(res.body, "temperature too hot") || !strings.Contains(res.body, `"param":"temperature"`) {
					t.Errorf("status %d body %s", res.status, res.body)
				}
			},
		},
		{
			name: "the upstream's 429 after the retries is the client's 429 with Retry-After", up: withRetries(fast, 1), requests: 2,
			script: func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				w.Header().Set("Retry-After", "0")
				http.Error(w, `{"error":{"message":"busy"}}`, http.StatusTooManyRequests)
			},
			check: func(t *testing.T, res sseResult, rig *relayRig) {
				if res.status != http.StatusTooManyRequests || !strings.Contains(res.body, "queue_full") {
					t.Errorf("status %d body %s", res.status, res.body)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, tt.script)
			rig := newRelay(t, up, tt.up, func(c *server.Config) { c.KeepAlive = 100 * time.Millisecond })
			res := post(t, t.Context(), rig.url, chatBody, 0)
			tt.check(t, res, rig)
			if got := up.requests.Load(); got != tt.requests {
				t.Errorf("%d upstream requests, want %d", got, tt.requests)
			}
		})
	}
}

// TestRelayClientLeaves: an upstream stream that would run on for 20,000
// chunks, a client that hangs up after 3: the upstream sees its connection
// close at once and nothing it sends afterwards is read.
func TestRelayClientLeaves(t *testing.T) {
	leakCheck(t)
	if problems := clientLeaves(t); len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
}

// TestRelayClientLeavesCheckCanFail is the mutation check of the test
// above: the same scenario and checker, through a relay whose upstream
// request is detached from its client (serve --abort-on-disconnect=false:
// the context is not cancelled and the body is read to its end), must be
// found wrong on each count — else the checker could pass a relay that
// never cancels.
func TestRelayClientLeavesCheckCanFail(t *testing.T) {
	leakCheck(t)
	problems := clientLeaves(t, func(c *server.Config) { c.AbortOnDisconnect = false })
	want := []string{"never saw the relay leave", "cancelled upstream streams", "chunks read after the client left"}
	if len(problems) != len(want) {
		t.Fatalf("the checker found %d problems with a detached relay, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	t.Logf("with the relay detached the checker reports:\n%s", strings.Join(problems, "\n"))
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d %q, want one about %q", i, problems[i], w)
		}
	}
}

// clientLeaves runs the scenario and returns what its checker found wrong.
func clientLeaves(t *testing.T, cfgs ...func(*server.Config)) (problems []string) {
	t.Helper()
	ended := make(chan struct{}, 1)
	up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sseStart(w)
		for i := 2; i < 20000 && r.Context().Err() == nil; i++ {
			chunk(w, i, "x")
		}
		if r.Context().Err() != nil {
			f.gone <- struct{}{}
			return
		}
		finish(w, "length")
		ended <- struct{}{}
	})
	rig := newRelay(t, up, fast, cfgs...)
	ctx, cancel := context.WithCancel(t.Context())
	res := post(t, ctx, rig.url, chatBody, 3)
	cancel()
	if res.text == "" || strings.Trim(res.text, "x") != "" {
		t.Fatalf("read %q", res.text)
	}
	select {
	case <-up.gone:
	case <-ended:
		problems = append(problems, "the upstream never saw the relay leave: it sent its whole stream")
	case <-time.After(5 * time.Second):
		problems = append(problems, "the upstream never saw the relay leave within 5 s")
	}
	cancelled := func() float64 { return counter(t, rig.reg, "sluice_relay_upstream_cancelled_total") }
	deadline := time.Now().Add(5 * time.Second)
	for cancelled() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := cancelled(); n != 1 {
		problems = append(problems, fmt.Sprintf("cancelled upstream streams %v, want 1", n))
	}
	// What was in flight when the client left (socket buffers, and what arrives before a loaded
	// machine schedules the cancellation: 65 once beside the e2e suite) may still be read; a
	// relay that kept reading counts the whole stream, about 20,000.
	if got := counter(t, rig.reg, "sluice_relay_tokens_after_client_left_total"); got > 2000 {
		problems = append(problems, fmt.Sprintf("%v chunks read after the client left", got))
	}
	return problems
}

// TestRelayStopClosesUpstream: a stop string given by the client is
// enforced by the relay even when the upstream ignores it: held back across
// chunks, never sent, and the upstream closed.
func TestRelayStopClosesUpstream(t *testing.T) {
	leakCheck(t)
	up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sseStart(w)
		for i, s := range []string{"one ", "two EN", "D three"} {
			chunk(w, i+2, s)
		}
		for i := 5; r.Context().Err() == nil; i++ {
			chunk(w, i, " more")
		}
		f.gone <- struct{}{}
	})
	rig := newRelay(t, up, fast)
	res := post(t, t.Context(), rig.url, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stop":["END"]}`, 0)
	if res.text != "one two " || res.finish != "stop" || !res.done || res.err != nil {
		t.Errorf("got %+v", res)
	}
	awaitGone(t, up)
}

// TestRelayQueueFull: past the upstream's slots and queue the relay answers
// 429 with Retry-After itself, without asking the upstream.
func TestRelayQueueFull(t *testing.T) {
	leakCheck(t)
	release := make(chan struct{})
	up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sseStart(w)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		finish(w, "stop")
	})
	u := fast
	u.MaxConcurrent, u.MaxQueue = 1, 1
	u.Stall = 10 * time.Second
	rig := newRelay(t, up, u)
	first := make(chan sseResult, 2)
	go func() { first <- post(t, t.Context(), rig.url, chatBody, 0) }()
	waitFor(t, func() bool { return up.requests.Load() == 1 })
	go func() { first <- post(t, t.Context(), rig.url, chatBody, 0) }() // waits in the queue
	waitFor(t, func() bool { return counter(t, rig.reg, "sluice_relay_requests_queued") == 1 })
	res, err := http.Post(rig.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status %d with the slot and the queue taken, want 429", res.StatusCode)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	close(release)
	for range 2 {
		if r := <-first; !r.done || r.err != nil {
			t.Errorf("an admitted stream: %+v", r)
		}
	}
	if got := up.requests.Load(); got != 2 {
		t.Errorf("%d upstream requests, want 2 (the refused one never reached it)", got)
	}
}

// waitFor polls cond, for effects that cross goroutines with no signal to wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitGone fails the test unless the fake upstream saw the relay close its
// connection within 5 s.
func awaitGone(t *testing.T, up *fakeUpstream) {
	t.Helper()
	select {
	case <-up.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never saw the relay close its connection")
	}
}
