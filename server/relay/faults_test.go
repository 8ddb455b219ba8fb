package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/relay"
)

// fakeUpstream is an OpenAI-compatible server that misbehaves on demand: the
// faults a real upstream cannot be made to produce (a stall, a cut, a bad
// chunk). Each request runs script; gone records that the handler saw its
// client (the relay) close the connection.
type fakeUpstream struct {
	*httptest.Server
	script   func(w http.ResponseWriter, r *http.Request, f *fakeUpstream)
	requests atomic.Int64
	gone     chan struct{} // one value per request whose connection the relay closed
	bodies   chan map[string]any
}

func newFake(t testing.TB, script func(w http.ResponseWriter, r *http.Request, f *fakeUpstream)) *fakeUpstream {
	f := &fakeUpstream{script: script, gone: make(chan struct{}, 64), bodies: make(chan map[string]any, 64)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.bodies <- body
		f.script(w, r, f)
	}))
	t.Cleanup(f.Close)
	return f
}

// chunk writes one chat chunk with text and flushes it.
func chunk(w http.ResponseWriter, id int, text string) {
	b, _ := json.Marshal(text)
	fmt.Fprintf(w, "id: %d\ndata: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", id, b)
	w.(http.Flusher).Flush()
}

func sseStart(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
	w.(http.Flusher).Flush()
}

func finish(w http.ResponseWriter, reason string) {
	fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", reason)
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// waitGone blocks until the fake's handler saw the relay leave.
func (f *fakeUpstream) waitGone(r *http.Request) {
	<-r.Context().Done()
	f.gone <- struct{}{}
}

// relayRig is a relay-mode Sluice in front of one fake upstream.
type relayRig struct {
	url string
	reg *prometheus.Registry
	up  *fakeUpstream
}

func newRelay(t testing.TB, up *fakeUpstream, u relay.Upstream, cfgs ...func(*server.Config)) *relayRig {
	t.Helper()
	u.URL = up.URL
	if u.Models == nil {
		u.Models = []string{"m"}
	}
	reg := prometheus.NewRegistry()
	rl, err := relay.New(t.Context(), []relay.Upstream{u}, reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.ModelID = "m"
	cfg.KeepAlive = 0
	for _, c := range cfgs {
		c(&cfg)
	}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRelay(rl); err != nil {
		t.Fatal(err)
	}
	srv.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // as serve --upstream wires it
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); rl.Close() })
	return &relayRig{url: hs.URL, reg: reg, up: up}
}

// sseResult is what a client read from the relay.
type sseResult struct {
	status     int
	body       string // a non-200 body
	text       string // the content deltas
	finish     string
	usage      map[string]any
	err        map[string]any // an in-band error
	done       bool
	keepAlives int
	events     int
	streamID   string
	lastID     string
}

// post sends a streaming chat request and reads the answer (all of it, or
// up to `limit` content events, then hangs up).
func post(t *testing.T, ctx context.Context, url, body string, limit int, hdr ...string) sseResult {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req, limit)
}

func do(t *testing.T, req *http.Request, limit int) sseResult {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	res := sseResult{status: resp.StatusCode, streamID: resp.Header.Get("X-Sluice-Stream-Id")}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		res.body = string(b)
		return res
	}
	br := bufio.NewReader(resp.Body)
	content := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return res
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, ":"):
			res.keepAlives++
		case strings.HasPrefix(line, "id: "):
			res.lastID = line[4:]
		case line == "data: [DONE]":
			res.done = true
			return res
		case strings.HasPrefix(line, "data: "):
			res.events++
			var c struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
					Text         string  `json:"text"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
				Usage map[string]any `json:"usage"`
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal([]byte(line[6:]), &c); err != nil {
				t.Fatalf("relay sent a bad chunk %q: %v", line, err)
			}
			if c.Error != nil {
				res.err = c.Error
			}
			if c.Usage != nil {
				res.usage = c.Usage
			}
			for _, ch := range c.Choices {
				res.text += ch.Delta.Content + ch.Text
				if ch.FinishReason != nil {
					res.finish = *ch.FinishReason
				}
				if ch.Delta.Content+ch.Text != "" {
					content++
				}
			}
			if limit > 0 && content >= limit {
				return res
			}
		}
	}
}

const chatBody = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// leakCheck fails the test if goroutines or file descriptors outlive it.
// The relay's reader and the fake's handlers end asynchronously after the
// last response, so the count is polled until it settles (a bound, not a sleep
// standing in for a signal).
func leakCheck(t *testing.T) {
	t.Helper()
	g0, fd0 := runtime.NumGoroutine(), fds()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		deadline := time.Now().Add(5 * time.Second)
		for {
			g, fd := runtime.NumGoroutine(), fds()
			if g <= g0 && fd <= fd0 {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("leak: %d goroutines (was %d), %d fds (was %d)\n%s", g, g0, fd, fd0, buf[:runtime.Stack(buf, true)])
				return
			}
			runtime.Gosched()
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func fds() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
