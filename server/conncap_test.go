package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// capRig serves a server with cfg's connection caps on a loopback port.
func capRig(t *testing.T, mutate func(*Config)) string {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	mutate(&cfg)
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// dialFrom opens a connection to addr from the loopback address from
// (127.0.0.x: every one of them is this machine's on Linux).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("dial from %s: %v (this system has no such loopback address)", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// hold opens a connection that sends half a request's headers and stops,
// as a slow or hostile client does: it keeps its slot until
// ReadHeaderTimeout.
func hold(t *testing.T, from, addr string) net.Conn {
	c := dialFrom(t, from, addr)
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: localhost\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// health sends a whole GET /health on a new connection from from and
// returns the response status and body.
func health(t *testing.T, from, addr string) (int, string) {
	t.Helper()
	c := dialFrom(t, from, addr)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("from %s: %v", from, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 503 && (!resp.Close || resp.Header.Get("Retry-After") == "") {
		t.Errorf("503 without Connection: close and Retry-After: %v", resp.Header)
	}
	return resp.StatusCode, string(b)
}

// TestConnCap: one client address holding connections with unfinished
// headers takes at most its share (--max-conns-per-ip), and the whole
// server at most --max-conns; beyond either a new connection is answered
// 503 at once instead of being held, others are still served, and a
// closed connection gives its slot back. Before the cap, every such
// connection was held and accepted.
func TestConnCap(t *testing.T) {
	addr := capRig(t, func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 4, 2 })
	held := hold(t, "127.0.0.1", addr)
	hold(t, "127.0.0.1", addr)
	if got, body := health(t, "127.0.0.1", addr); got != 503 || !strings.Contains(body, `"code":"too_many_connections"`) ||
		!strings.Contains(body, "--max-conns-per-ip 2") {
		t.Fatalf("third connection from one address: %d %s", got, body)
	}
	if got, body := health(t, "127.0.0.2", addr); got != 200 {
		t.Fatalf("another address while the first is at its share: %d %s", got, body)
	}
	hold(t, "127.0.0.2", addr)
	hold(t, "127.0.0.3", addr) // four open: the whole cap
	if got, body := health(t, "127.0.0.4", addr); got != 503 || !strings.Contains(body, "--max-conns 4") {
		t.Fatalf("a connection beyond --max-conns: %d %s", got, body)
	}
	held.Close()
	// The server sees the close when its read of the headers ends; a
	// refused try means it has not yet.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, body := health(t, "127.0.0.1", addr)
		if got == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed connection's slot did not come back: %d %s", got, body)
		}
	}
}

// TestConnCapDefaults: the default share is an eighth of --max-conns for other
// machines' addresses; this machine's clients (a local proxy, a benchmark)
// are held only to --max-conns. With both at 0 there is no cap at all.
func TestConnCapDefaults(t *testing.T) {
	addr := capRig(t, func(c *Config) { c.MaxConns = 4 })
	for range 3 {
		hold(t, "127.0.0.1", addr)
	}
	if got, body := health(t, "127.0.0.1", addr); got != 200 {
		t.Errorf("a loopback client past the default share: %d %s", got, body)
	}
	hold(t, "127.0.0.1", addr)
	if got, body := health(t, "127.0.0.1", addr); got != 503 || !strings.Contains(body, "--max-conns 4") {
		t.Errorf("a loopback client past --max-conns: %d %s", got, body)
	}

	c := DefaultConfig()
	c.ModelID, c.MaxConns = "m", 4
	s, _ := New(c, nil)
	l := s.capConns(nil).(*capListener)
	remote := func(a string) netip.Prefix { return netip.MustParsePrefix(a) }
	for i, tt := range []struct {
		peer  string
		local bool
		want  []byte
	}{
		{"10.0.0.1/32", false, nil}, {"10.0.0.1/32", false, l.fullIP},
		{"10.0.0.2/32", false, nil}, {"127.0.0.1/32", true, nil}, {"10.0.0.3/32", false, nil},
		{"10.0.0.4/32", false, l.full},
	} {
		if got := l.take(remote(tt.peer), tt.local); string(got) != string(tt.want) {
			t.Errorf("take %d (%s): %.60q, want %.60q", i, tt.peer, got, tt.want)
		}
	}

	off := capRig(t, func(c *Config) { c.MaxConns = 0 })
	for range 8 {
		hold(t, "127.0.0.1", off)
	}
	if got, _ := health(t, "127.0.0.1", off); got != 200 {
		t.Errorf("no cap: %d", got)
	}
}

func TestPeerPrefix(t *testing.T) {
	key := func(s string) netip.Prefix {
		p, _ := peerOf(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)))
		return p
	}
	for a, local := range map[string]bool{"[::1]:1": true, "127.0.0.2:1": true, "[::ffff:127.0.0.1]:1": true, "10.0.0.1:1": false, "[2001:db8::1]:1": false} {
		if _, got := peerOf(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a))); got != local {
			t.Errorf("%s: loopback %v", a, got)
		}
	}
	if key("[2001:db8::1]:1") != key("[2001:db8::ffff:2]:2") {
		t.Error("one /64 counts as two clients")
	}
	if key("[2001:db8:0:1::1]:1") == key("[2001:db8::1]:1") {
		t.Error("two /64s count as one client")
	}
	if key("[::ffff:10.0.0.1]:1") != key("10.0.0.1:2") || key("10.0.0.1:1") == key("10.0.0.2:1") {
		t.Error("IPv4 addresses are not counted one by one")
	}
}

// TestDefaultConnCap: sluice serve caps connections unless told not to, and
// one remote client's share is below the 256 half-sent requests the finding
// held open.
func TestDefaultConnCap(t *testing.T) {
	c := DefaultConfig()
	c.ModelID = "m"
	s, _ := New(c, nil)
	l, ok := s.capConns(nil).(*capListener)
	if !ok || l.max != 1024 || l.perIP != 128 {
		t.Fatalf("default caps: %+v", l)
	}
}
