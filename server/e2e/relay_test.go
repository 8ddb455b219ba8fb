package e2e

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/relay"
)

// relayFront is a relay-mode Sluice whose upstream is the rig's real Sluice
// on the default model: the loopback setup of `sluice serve --upstream`.
type relayFront struct {
	url string
	reg *prometheus.Registry
}

func startRelay(t *testing.T, r *rig) *relayFront {
	t.Helper()
	// No Models: the relay asks the upstream's /v1/models, as --upstream URL does.
	return relayTo(t, relay.Upstream{URL: r.url}, keepAlive)
}

// relayTo is a relay-mode Sluice in front of up, with keep-alives every keep.
func relayTo(t *testing.T, up relay.Upstream, keep time.Duration) *relayFront {
	t.Helper()
	reg := prometheus.NewRegistry()
	rl, err := relay.New(t.Context(), []relay.Upstream{up}, reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.ModelID = rl.Models()[0]
	cfg.KeepAlive = keep
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRelay(rl); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); rl.Close() })
	return &relayFront{url: hs.URL, reg: reg}
}

func (f *relayFront) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestRelayEqualsDirect: through the relay a greedy stream says exactly what
// the upstream says to a direct client — text, finish reason, usage — and a
// stop string held back by both stays out of both.
func TestRelayEqualsDirect(t *testing.T) {
	r := getRig(t)
	front := startRelay(t, r)
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"Count from one to ten in words."}],"max_tokens":40,"temperature":0,"stream":true,"stop":["five"],"stream_options":{"include_usage":true}}`,
	} {
		direct := decode(t, ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/chat/completions", body).Body), 0))
		relayed := decode(t, ssetest.Read(t, bufio.NewReader(ssetest.Post(t, front.url+"/v1/chat/completions", body).Body), 0))
		if relayed.text != direct.text || relayed.finish != direct.finish || relayed.completion != direct.completion || relayed.errCode != "" {
			t.Errorf("relayed %q (%s, %d tokens, err %q)\ndirect  %q (%s, %d tokens)",
				relayed.text, relayed.finish, relayed.completion, relayed.errCode, direct.text, direct.finish, direct.completion)
		}
	}
	body := `{"prompt":"The capital of France is","max_tokens":12,"temperature":0}`
	direct, df := r.complete(t, body)
	relayed, rf := (&rig{url: front.url}).complete(t, body)
	if relayed != direct || rf != df {
		t.Errorf("non-streaming: relayed %q (%s), direct %q (%s)", relayed, rf, direct, df)
	}
}

// TestRelayDisconnectFreesUpstream: a client that leaves the relay
// mid-stream closes the upstream stream at once, and the upstream Sluice
// aborts the sequence and frees its KV blocks.
func TestRelayDisconnectFreesUpstream(t *testing.T) {
	r := getRig(t)
	front := startRelay(t, r)
	before := r.waitIdle(t, 5*time.Second)
	resp := ssetest.Post(t, front.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Write a long essay about the history of the sea."}],"max_tokens":400,"temperature":0,"stream":true}`)
	if s := decode(t, ssetest.Read(t, bufio.NewReader(resp.Body), 4)); len(s.pieces) == 0 {
		t.Fatalf("no text mid-stream: %+v", s)
	}
	if s := r.stats(); s.Running != 1 || s.KV.Used == 0 {
		t.Fatalf("mid-stream upstream: running %d, KV %+v", s.Running, s.KV)
	}
	resp.Body.Close()
	after := r.waitIdle(t, 2*time.Second)
	if after.Aborted != before.Aborted+1 {
		t.Errorf("upstream aborted %d→%d, want one abort", before.Aborted, after.Aborted)
	}
	if n := after.GenTokens - before.GenTokens; n >= 400 {
		t.Errorf("the upstream generated %d tokens: it ran to the end", n)
	}
	deadline := time.Now().Add(2 * time.Second)
	for front.counter(t, "sluice_relay_upstream_cancelled_total") != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := front.counter(t, "sluice_relay_upstream_cancelled_total"); got != 1 {
		t.Errorf("cancelled upstream streams %v, want 1", got)
	}
	t.Logf("upstream tokens: %d generated in all; %v chunks read by the relay after its client left",
		after.GenTokens-before.GenTokens, front.counter(t, "sluice_relay_tokens_after_client_left_total"))
}

// TestRelayResumeEqualsUninterrupted: a client cut off mid-stream reconnects
// to the relay with Last-Event-ID. The relay replays its own retained events
// and continues the upstream's generation through the upstream's resume —
// from its prefix cache, not a second generation — and the text equals the
// uninterrupted stream's.
func TestRelayResumeEqualsUninterrupted(t *testing.T) {
	r := getRig(t)
	front := startRelay(t, r)
	body := `{"messages":[{"role":"user","content":"Tell me about the ocean."}],"max_tokens":40,"temperature":0,"stream":true}`
	whole := decode(t, ssetest.Read(t, bufio.NewReader(ssetest.Post(t, front.url+"/v1/chat/completions", body).Body), 0))

	start := r.waitIdle(t, 5*time.Second)
	resp := ssetest.Post(t, front.url+"/v1/chat/completions", body)
	id := resp.Header.Get("X-Sluice-Stream-Id")
	first := ssetest.Read(t, bufio.NewReader(resp.Body), 8)
	resp.Body.Close()
	idle := r.waitIdle(t, 2*time.Second) // the upstream freed its blocks at once

	last := first[len(first)-1].ID
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", front.url+"/v1/streams/"+id, nil)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	again, err := http.DefaultClient.Do(req)
	if err != nil || again.StatusCode != 200 {
		t.Fatalf("resume: %v %v", err, again.Status)
	}
	defer again.Body.Close()
	rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
	for i, ev := range rest {
		if ev.ID != last+1+int64(i) {
			t.Fatalf("resumed event %d has id %d, want %d", i, ev.ID, last+1+int64(i))
		}
	}
	got := decode(t, append(first, rest...))
	if got.text != whole.text || got.finish != whole.finish || got.errCode != "" {
		t.Errorf("resumed %q (%s, err %q)\nuninterrupted %q (%s)", got.text, got.finish, got.errCode, whole.text, whole.finish)
	}
	end := r.waitIdle(t, 5*time.Second)
	if end.PrefixHitTokens == idle.PrefixHitTokens {
		t.Error("the upstream's continuation found nothing in its prefix cache")
	}
	// One generation of 40 tokens, cut and continued: a second generation
	// would be another 40 on top.
	if n := end.GenTokens - start.GenTokens; n > 40+8 {
		t.Errorf("the upstream generated %d tokens for one 40-token stream", n)
	}
	t.Logf("upstream: %d tokens generated for the cut and resumed stream; %d from its prefix cache",
		end.GenTokens-start.GenTokens, end.PrefixHitTokens-idle.PrefixHitTokens)
}
