package agents

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A client that hangs up once it has the event it waits for, while the
// upstream body has not ended (Codex after response.completed, which exits
// after the last one), is still on record with what it sent and was sent.
// The recorder used to lose it: ReverseProxy ends such a handler with
// panic(http.ErrAbortHandler), past the line that kept the exchange.
func TestRecorderKeepsCutExchange(t *testing.T) {
	upstreamDone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(upstreamDone)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.completed\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		// The body ends only once the proxy gives up on it, so the client's
		// hang-up always comes first.
		<-r.Context().Done()
	}))
	defer up.Close()
	rec := record(t, up.URL)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	const sent = `{"input":"x"}`
	resp, err := (&http.Client{Transport: tr}).Post(rec.url+"/v1/responses", "application/json", strings.NewReader(sent))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: response.completed\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	resp.Body.Close() // before the body's end: the connection is closed
	<-upstreamDone

	xs := rec.exchanges()
	if len(xs) != 1 {
		t.Fatalf("%d exchanges on record, want 1", len(xs))
	}
	x := xs[0]
	if string(x.Body) != sent || x.Status != 200 || !x.Cut || !bytes.Contains(x.Response, []byte("response.completed")) {
		t.Fatalf("exchange: body %q, status %d, cut %v, response %q", x.Body, x.Status, x.Cut, x.Response)
	}
}
