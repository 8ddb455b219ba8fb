package server

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/relay"
)

// recorder is a proxy between a relay and its upstream that keeps every
// byte the upstream answered.
type recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

type teeBody struct {
	io.ReadCloser
	r *recorder
}

func (b teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	b.r.buf.Write(p[:n])
	b.r.mu.Unlock()
	return n, err
}

func (r *recorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.buf.Bytes(), []byte(s))
}

// newRelayFront serves a relay to upstream through a recorder.
func newRelayFront(t *testing.T, upstream string) (string, *recorder) {
	t.Helper()
	target, _ := url.Parse(upstream)
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		resp.Body = teeBody{resp.Body, rec}
		return nil
	}
	mid := httptest.NewServer(proxy)
	t.Cleanup(mid.Close)
	return serveRelay(t, mid.URL), rec
}

// serveRelay serves a relay to upstream, which serves testModel, and
// returns its URL.
func serveRelay(t *testing.T, upstream string) string {
	t.Helper()
	rl, err := relay.New(t.Context(), []relay.Upstream{{URL: upstream, Models: []string{testModel}}}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRelay(rl); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); rl.Close() })
	return hs.URL
}

// seals are the signatures and encrypted_contents in a response.
var seals = regexp.MustCompile(`"(?:signature|encrypted_content)":"([^"]+)"`)

// TestRelayReasoningAllAPIs: through a relay whose upstream is a Sluice
// serving a reasoning model, each API's client reads the upstream's
// reasoning as that API's reasoning, whole and streamed: chat's
// reasoning_content and reasoning, Messages' thinking block, Responses'
// reasoning item with its summary; the text and the call after it; the
// upstream's 5 reasoning tokens in usage. Every signature and
// encrypted_content the client gets is the upstream's, byte for byte (the
// relay's own seal would differ: each seal has its own nonce), so the
// client's round trip reaches the upstream that can open it. Before the
// relay carried reasoning, chat and Responses dropped it and a Messages
// stream failed on the thinking_delta.
func TestRelayReasoningAllAPIs(t *testing.T) {
	up := newReasonRig(t, thinkTags)
	up.script(qwenReply...)
	front, rec := newRelayFront(t, up.url)
	want := reply{reasoning: "\nLet me think.\n", text: "Checking.", calls: `get_weather({"city": "Oslo"});`, reasoningTokens: 5}
	for _, a := range apis {
		for _, streamed := range []bool{false, true} {
			resp := ssetest.Post(t, front+a.path, a.body("", streamed))
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s (stream %v): %d %s", a.name, streamed, resp.StatusCode, raw)
			}
			var got reply
			switch {
			case !streamed:
				got = a.whole(t, raw)
			case a.name == "chat":
				got = a.stream(t, ssetest.Read(t, bufio.NewReader(bytes.NewReader(raw)), 0))
			default:
				got = a.stream(t, ssetest.ReadNamed(t, bufio.NewReader(bytes.NewReader(raw)), 0))
			}
			w := want
			if a.name == "messages" {
				w.reasoningTokens, w.calls = 0, `get_weather({"city":"Oslo"});`
			}
			if got != w {
				t.Errorf("%s (stream %v): %+v, want %+v", a.name, streamed, got, w)
			}
			n := 0
			for _, m := range seals.FindAllSubmatch(raw, -1) {
				n++
				if !rec.has(string(m[1])) {
					t.Errorf("%s (stream %v): seal %.40q… is not the upstream's", a.name, streamed, m[1])
				}
			}
			if a.name != "chat" && n == 0 {
				t.Errorf("%s (stream %v): no seal in %s", a.name, streamed, raw)
			}
		}
	}
}
