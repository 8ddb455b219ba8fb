package agents

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// A client that outlives its limit is ended with everything it started:
// Codex's npm bin is a node wrapper whose native binary used to survive
// the wrapper's kill.
func TestRunClientEndsItsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	_, _, err := runClient(t, time.Second, t.TempDir(), nil, "/bin/sh", "-c",
		`sleep 600 >/dev/null 2>&1 & echo $! >`+pidFile+`; wait`)
	if err == nil {
		t.Fatal("runClient: no error past its limit")
	}
	b, rerr := os.ReadFile(pidFile)
	pid, cerr := strconv.Atoi(strings.TrimSpace(string(b)))
	if rerr != nil || cerr != nil {
		t.Fatalf("the child's pid: %v %v", rerr, cerr)
	}
	for deadline := time.Now().Add(20 * time.Second); alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the client's child %d outlived runClient", pid)
		}
	}
}

// alive reports whether pid runs: a zombie does not (its parent died too,
// and a container's init may never reap it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || len(b) < i+3 || b[i+2] != 'Z'
}
