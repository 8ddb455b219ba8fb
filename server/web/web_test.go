package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// countModel is a model whose next token is always 1 (never an
// end-of-generation id: the engine sets none), so sequences run to their
// MaxTokens.
type countModel struct{ logits []float32 }

func (m *countModel) VocabSize() int  { return 8 }
func (m *countModel) ContextLen() int { return 4096 }
func (m *countModel) Forward(b *kernels.Batch) ([]float32, error) {
	m.logits = m.logits[:0]
	for range b.LogitRows {
		m.logits = append(m.logits, 0, 1, 0, 0, 0, 0, 0, 0)
	}
	return m.logits, nil
}

func newEngine(t testing.TB) *engine.Engine {
	e, err := engine.New(&countModel{}, engine.Config{Blocks: 256, BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func run(t testing.TB, e *engine.Engine, n int) {
	t.Helper()
	s, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 2, 3, 4, 5}, MaxTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	for range s.Tokens() {
	}
}

func newServer(t testing.TB, w *Web) *httptest.Server {
	mux := http.NewServeMux()
	for p, h := range w.Routes() {
		mux.Handle(p, h)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(func() { ts.Close(); w.Close() })
	return ts
}

func get(t *testing.T, ctx context.Context, url string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// The page and its assets come from the binary with a policy that runs no
// inline script and no other origin's; only / itself is the page.
func TestPage(t *testing.T) {
	ts := newServer(t, New(nil))
	for _, tc := range []struct {
		path, ctype, has string
		status           int
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="/ui/app.js">`, 200},
		{"/ui/app.js", "text/javascript; charset=utf-8", "import { render, Live } from './md.js'", 200},
		{"/ui/md.js", "text/javascript; charset=utf-8", "export function render", 200},
		{"/ui/style.css", "text/css; charset=utf-8", "prefers-color-scheme", 200},
		{"/elsewhere", "", "", 404},
	} {
		resp := get(t, t.Context(), ts.URL+tc.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d", tc.path, resp.StatusCode)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != tc.ctype || !strings.Contains(string(body), tc.has) {
			t.Errorf("%s: Content-Type %q, body has %q: %v", tc.path, ct, tc.has, strings.Contains(string(body), tc.has))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", tc.path, csp)
		}
	}
}

// The status stream asks for the key the API asks for.
func TestEventsNeedKey(t *testing.T) {
	w := New(func(r *http.Request) (string, bool) { return "", r.Header.Get("Authorization") == "Bearer k" })
	w.Attach(newEngine(t))
	ts := newServer(t, w)
	if resp := get(t, t.Context(), ts.URL+"/v1/engine/events"); resp.StatusCode != 401 {
		t.Fatalf("no key: status %d", resp.StatusCode)
	}
	resp := get(t, t.Context(), ts.URL+"/v1/engine/events", "Authorization", "Bearer k")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("with the key: status %d, %v", resp.StatusCode, resp.Header)
	}
}

// readFrame returns the next frame event.
func readFrame(t *testing.T, r *bufio.Reader) ssetest.Event {
	t.Helper()
	evs := ssetest.Read(t, r, 1)
	if len(evs) != 1 {
		t.Fatal("stream ended")
	}
	return evs[0]
}

// Two clients get the same bytes for a frame (encoded once); with nobody
// connected the engine builds no frames, so after a run nobody watched the
// frame numbers go on from where they were, not from every step run since;
// an idle engine answers a new client at once.
func TestEventsSharedAndIdleWhenUnwatched(t *testing.T) {
	e := newEngine(t)
	w := New(nil)
	w.Attach(e)
	ts := newServer(t, w)
	ctx, cancel := context.WithCancel(t.Context())
	a := bufio.NewReader(get(t, ctx, ts.URL+"/v1/engine/events").Body)
	b := bufio.NewReader(get(t, ctx, ts.URL+"/v1/engine/events").Body)
	readFrame(t, a) // the idle engine's frame: both are connected from here on
	readFrame(t, b)
	run(t, e, 20)
	seen := map[int64]string{}
	var last int64
	// Read on to the frame that carries the run's end, so both clients
	// have a frame to compare.
	for last < 15 || !strings.Contains(seen[last], `"finish"`) {
		ev := readFrame(t, a)
		seen[ev.ID], last = ev.Data, ev.ID
	}
	shared := 0
	for {
		ev := readFrame(t, b)
		if d, ok := seen[ev.ID]; ok {
			if d != ev.Data {
				t.Fatalf("frame %d differs between clients", ev.ID)
			}
			shared++
		}
		if ev.ID >= last {
			break
		}
	}
	if shared == 0 {
		t.Fatal("no frame reached both clients")
	}
	cancel()
	waitClients(t, w, 0)
	before := e.Stats().Steps
	run(t, e, 100)
	if e.Stats().Steps < before+99 {
		t.Fatalf("steps %d → %d", before, e.Stats().Steps)
	}
	c := bufio.NewReader(get(t, t.Context(), ts.URL+"/v1/engine/events").Body)
	// The first frame shows the idle engine: the synthetic one (id 0), or a
	// real one. The run's stream closes inside the loop's last iteration,
	// before it publishes Stats; a viewer counted in within that window
	// still sees the sequence running, waits, and gets the frame that
	// iteration builds (CI saw id 21; a sleep at the top of publish shows
	// it every time). Either way no frame was built for the unwatched steps.
	if ev := readFrame(t, c); ev.ID > 40 || !strings.Contains(ev.Data, `"seqs":[]`) || !strings.Contains(ev.Data, `"running":0`) {
		t.Fatalf("idle engine's frame: id %d %s", ev.ID, ev.Data)
	}
	if _, err := e.Submit(t.Context(), engine.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 10}); err != nil {
		t.Fatal(err)
	}
	ev := readFrame(t, c)
	// The watched run of 20 steps built about 22 frames; the unwatched one
	// of 100 built none.
	if ev.ID > 40 {
		t.Fatalf("first frame built after an unwatched run of 100 steps has id %d", ev.ID)
	}
}

// waitClients waits until the hub counts n clients (handlers return once
// their request context ends, which the server notices on its own time)
// and, for none, until its engine watcher is closed.
func waitClients(t *testing.T, w *Web, n int) {
	t.Helper()
	for {
		w.hub.mu.Lock()
		c, running := w.hub.clients, w.hub.stop != nil
		w.hub.mu.Unlock()
		if c == n && running == (n > 0) {
			if n == 0 {
				w.hub.running.Wait() // the engine watcher is closed
			}
			return
		}
		select {
		case <-w.hub.cur.Load().next: // leave publishes a stale mark
		case <-t.Context().Done():
			t.Fatalf("hub has %d clients, want %d", c, n)
		}
	}
}

// Close ends open status streams at once (a graceful shutdown waits for
// every handler) and refuses new ones.
func TestCloseEndsStreams(t *testing.T) {
	w := New(nil)
	w.Attach(newEngine(t))
	ts := newServer(t, w)
	r := bufio.NewReader(get(t, t.Context(), ts.URL+"/v1/engine/events").Body)
	readFrame(t, r)
	w.Close()
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after Close: %q, %v", rest, err)
	}
	if resp := get(t, t.Context(), ts.URL+"/v1/engine/events"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a new stream after Close: status %d", resp.StatusCode)
	}
}

// gatedModel is countModel taking one step per value sent on gate, so a
// test sees every step's frame.
type gatedModel struct {
	countModel
	gate chan struct{}
}

func (m *gatedModel) Forward(b *kernels.Batch) ([]float32, error) {
	<-m.gate
	return m.countModel.Forward(b)
}

// With more than one key, each key's status stream shows only its own
// sequences and ends (the engine-wide figures stay): before, any key saw
// every tenant's requests, their lengths and their blocks.
func TestEventsShowOnlyOwnTenant(t *testing.T) {
	m := &gatedModel{gate: make(chan struct{})}
	e, err := engine.New(m, engine.Config{Blocks: 256, BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	w := New(func(r *http.Request) (string, bool) {
		switch r.Header.Get("Authorization") {
		case "Bearer a":
			return "key-a", true
		case "Bearer b":
			return "key-b", true
		}
		return "", false
	})
	w.Attach(e)
	ts := newServer(t, w)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a := bufio.NewReader(get(t, ctx, ts.URL+"/v1/engine/events", "Authorization", "Bearer a").Body)
	readFrame(t, a)
	// A's sequence has a 3-token prompt, B's a 7-token one: a frame names
	// each by its prompt length, in its sequence entry ("prompt":n,"tokens";
	// the engine-wide step figures also hold a "prompt" count, of the
	// step's prompt rows, which is 7 when B's prompt runs in a step of its
	// own).
	for _, r := range []engine.Request{
		{Prompt: []int32{1, 2, 3}, MaxTokens: 8, Tenant: "key-a"},
		{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, MaxTokens: 8, Tenant: "key-b"},
	} {
		if _, err := e.Submit(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	own := 0
	for own < 3 {
		m.gate <- struct{}{}
		ev := readFrame(t, a)
		if strings.Contains(ev.Data, `"prompt":7,"tokens"`) {
			t.Fatalf("key A's stream shows B's sequence: %s", ev.Data)
		}
		if strings.Contains(ev.Data, `"prompt":3,"tokens"`) {
			own++
		}
	}
	closed := make(chan struct{})
	go func() { // open the gate until the engine has closed
		for {
			select {
			case m.gate <- struct{}{}:
			case <-closed:
				return
			}
		}
	}()
	cancel()
	_ = e.Close(context.Background())
	close(closed)
}
