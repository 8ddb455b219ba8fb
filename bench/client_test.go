package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedClock answers the i-th call with base+at[i]: the client reads the
// clock once at send and once per data event, so a test knows exactly which
// time each event "arrived" at, whatever the loopback timing really was.
type scriptedClock struct {
	mu   sync.Mutex
	base time.Time
	at   []time.Duration
	n    int
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= len(c.at) {
		panic(fmt.Sprintf("clock read %d times, script has %d", c.n+1, len(c.at)))
	}
	t := c.base.Add(c.at[c.n])
	c.n++
	return t
}

const ms = time.Millisecond

// sse helpers build the fake server's wire bytes.
func chatChunk(content string) string {
	return fmt.Sprintf(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", content)
}

func textChunk(text string) string {
	return fmt.Sprintf(`data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":%q,"finish_reason":null}]}`+"\r\n\r\n", text)
}

const (
	roleChunk   = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	finishChunk = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	keepAlive   = ": keep-alive\n\n"
	done        = "data: [DONE]\n\n"
)

func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", prompt, completion, prompt+completion)
}

// fakeServer streams events one write (and flush) each. It reports on left
// when a client hangs up before the handler is done.
func fakeServer(t *testing.T, status int, events []string, left chan<- struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != http.StatusOK {
			http.Error(w, `{"error":{"message":"queue full","type":"rate_limit_error"}}`, status)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		for _, e := range events {
			if _, err := w.Write([]byte(e)); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		if left != nil {
			<-r.Context().Done()
			left <- struct{}{}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestClientTimings(t *testing.T) {
	tests := []struct {
		name   string
		chat   bool
		status int
		events []string
		// at: send time, then one entry per data event.
		at      []time.Duration
		abandon int

		wantTTFT   time.Duration
		wantITL    []time.Duration
		wantE2E    time.Duration
		wantTokens int
		wantUsage  bool
		wantText   string
		wantErr    string // substring; "" = OK
		wantAband  bool
	}{
		{
			name: "chat with keep-alive and usage", chat: true, status: 200,
			events:   []string{roleChunk, keepAlive, chatChunk("Hello"), keepAlive, chatChunk(" world"), chatChunk("!"), finishChunk, usageChunk(12, 3), done},
			at:       []time.Duration{0, 5 * ms, 40 * ms, 55 * ms, 85 * ms, 86 * ms, 87 * ms, 90 * ms},
			wantTTFT: 40 * ms, wantITL: []time.Duration{15 * ms, 30 * ms}, wantE2E: 90 * ms,
			wantTokens: 3, wantUsage: true, wantText: "Hello world!",
		},
		{
			name: "completions, non-Latin text, CRLF, no usage", status: 200,
			events:   []string{textChunk("Привет"), textChunk(", 世界"), textChunk(" 🙂"), done},
			at:       []time.Duration{0, 100 * ms, 120 * ms, 160 * ms, 161 * ms},
			wantTTFT: 100 * ms, wantITL: []time.Duration{20 * ms, 40 * ms}, wantE2E: 161 * ms,
			wantTokens: 3, wantText: "Привет, 世界 🙂",
		},
		{
			name: "in-band error after a token", chat: true, status: 200,
			events:   []string{roleChunk, chatChunk("a"), `data: {"error":{"message":"engine failed","type":"server_error"}}` + "\n\n", done},
			at:       []time.Duration{0, 1 * ms, 30 * ms, 45 * ms, 46 * ms},
			wantTTFT: 30 * ms, wantITL: nil, wantE2E: 46 * ms, wantTokens: 1, wantText: "a",
			wantErr: "engine failed",
		},
		{
			name: "stream cut without [DONE]", chat: true, status: 200,
			events:   []string{chatChunk("x"), chatChunk("y")},
			at:       []time.Duration{0, 10 * ms, 30 * ms, 31 * ms},
			wantTTFT: 10 * ms, wantITL: []time.Duration{20 * ms}, wantE2E: 31 * ms, wantTokens: 2, wantText: "xy",
			wantErr: "without [DONE]",
		},
		{
			name: "HTTP 429 before the stream", chat: true, status: 429,
			at:      []time.Duration{0, 7 * ms},
			wantE2E: 7 * ms, wantErr: "HTTP 429",
		},
		{
			name: "abandon after two tokens", chat: true, status: 200, abandon: 2,
			events:   []string{roleChunk, chatChunk("один"), chatChunk(" два"), chatChunk(" три"), chatChunk(" четыре")},
			at:       []time.Duration{0, 2 * ms, 20 * ms, 50 * ms, 70 * ms, 90 * ms},
			wantTTFT: 20 * ms, wantITL: []time.Duration{30 * ms}, wantE2E: 50 * ms, wantTokens: 2, wantText: "один два",
			wantAband: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var left chan struct{}
			if tc.abandon > 0 {
				left = make(chan struct{}, 1)
			}
			srv := fakeServer(t, tc.status, tc.events, left)
			clk := &scriptedClock{base: time.Unix(1000, 0), at: tc.at}
			c := &Client{URL: srv.URL, HTTP: NewHTTPClient(4), Chat: tc.chat, Now: clk.Now}
			r := c.Do(context.Background(), Request{Prompt: "hi", MaxTokens: 16, AbandonAfter: tc.abandon})

			if r.TTFT != tc.wantTTFT || r.E2E != tc.wantE2E || !slices.Equal(r.ITL, tc.wantITL) {
				t.Errorf("TTFT %v ITL %v E2E %v, want %v %v %v", r.TTFT, r.ITL, r.E2E, tc.wantTTFT, tc.wantITL, tc.wantE2E)
			}
			if r.OutputTokens != tc.wantTokens || r.UsageReported != tc.wantUsage || r.Text != tc.wantText {
				t.Errorf("tokens %d usage %v text %q, want %d %v %q", r.OutputTokens, r.UsageReported, r.Text, tc.wantTokens, tc.wantUsage, tc.wantText)
			}
			if (tc.wantErr == "") != (r.Err == "") || !strings.Contains(r.Err, tc.wantErr) {
				t.Errorf("Err %q, want %q", r.Err, tc.wantErr)
			}
			if r.Abandoned != tc.wantAband || r.OK() != (tc.wantErr == "" && !tc.wantAband) {
				t.Errorf("Abandoned %v OK %v", r.Abandoned, r.OK())
			}
			if tc.abandon > 0 {
				select {
				case <-left: // the server saw the connection close
				case <-time.After(10 * time.Second):
					t.Fatal("server never saw the client hang up")
				}
			}
		})
	}
}

func TestClientUsageTPOT(t *testing.T) {
	// 3 content events but usage says 5 tokens (a server that coalesced):
	// TPOT spreads the 60 ms between first and last event over 4 tokens.
	srv := fakeServer(t, 200, []string{chatChunk("a"), chatChunk("bc"), chatChunk("de"), usageChunk(4, 5), done}, nil)
	clk := &scriptedClock{base: time.Unix(0, 0), at: []time.Duration{0, 10 * ms, 40 * ms, 70 * ms, 71 * ms, 72 * ms}}
	c := &Client{URL: srv.URL, Chat: true, Now: clk.Now}
	r := c.Do(context.Background(), Request{Prompt: "x", MaxTokens: 5})
	if r.Err != "" || r.OutputTokens != 5 || r.ContentEvents != 3 || r.PromptTokens != 4 {
		t.Fatalf("%+v", r)
	}
	if got, want := r.TPOT(), 15*ms; got != want {
		t.Errorf("TPOT %v, want %v", got, want)
	}
}

func TestReadEventsMultiLine(t *testing.T) {
	in := "id: 1\nevent: message\ndata: first\ndata: second\n\n: comment\nretry: 10\n\ndata:no-space\r\n\r\ndata: last-without-blank"
	var got []string
	err := ReadEvents(strings.NewReader(in), func(d []byte) error { got = append(got, string(d)); return nil })
	want := []string{"first\nsecond", "no-space", "last-without-blank"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

// TestClientResendsOnClosedKeepAlive: the server answers one request on a
// connection, then reads the next one there and closes without a byte (as a
// server closing an idle connection at the moment it is reused). The request
// must succeed on a fresh connection instead of failing.
func TestClientResendsOnClosedKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	body := chatChunk("ok") + done
	response := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			readRequest := func() bool {
				req, err := http.ReadRequest(br)
				if err != nil {
					return false
				}
				io.Copy(io.Discard, req.Body)
				return true
			}
			if readRequest() {
				c.Write([]byte(response))
			}
			if n == 0 && readRequest() { // second request on the first connection: hang up
				c.Close()
				continue
			}
			c.Close()
		}
	}()
	c := &Client{URL: "http://" + ln.Addr().String(), HTTP: NewHTTPClient(1), Chat: true}
	for i := range 2 {
		if r := c.Do(context.Background(), Request{Prompt: "x", MaxTokens: 1}); !r.OK() || r.Text != "ok" {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
}
