package server

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no model id", func(c *Config) { c.ModelID = "" }, "model id"},
		{"negative keepalive", func(c *Config) { c.KeepAlive = -time.Second }, "keepalive"},
		{"zero read header timeout", func(c *Config) { c.ReadHeaderTimeout = 0 }, "read-header-timeout"},
		{"flush interval too long", func(c *Config) { c.FlushInterval = 2 * time.Second }, "flush-interval"},
		{"stream cap over total", func(c *Config) { c.ResumeStreamBytes = c.ResumeTotalBytes + 1 }, "resume byte caps"},
		{"no body limit", func(c *Config) { c.MaxBodyBytes = 0 }, "max-body-bytes"},
		{"negative conn cap", func(c *Config) { c.MaxConns = -1 }, "max-conns"},
		{"per-ip cap over total", func(c *Config) { c.MaxConnsPerIP = c.MaxConns + 1 }, "max-conns-per-ip"},
		{"per-ip cap alone", func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 0, 8 }, ""},
		{"bad allowed host", func(c *Config) { c.AllowedHosts = []string{"https://a.example"} }, "allowed-hosts"},
		{"two errors at once", func(c *Config) { c.Addr = ""; c.IdleTimeout = 0 }, "addr is empty\nidle-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ModelID = "m"
			tt.mutate(&c)
			err := c.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestHTTPServerTimeouts: long streams must not meet a whole-response write timeout.
func TestHTTPServerTimeouts(t *testing.T) {
	c := DefaultConfig()
	c.ModelID = "m"
	s, _ := New(c, nil)
	hs := s.HTTPServer()
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.WriteTimeout != 0 || hs.ReadTimeout != 0 {
		t.Errorf("read header %v idle %v write %v read %v", hs.ReadHeaderTimeout, hs.IdleTimeout, hs.WriteTimeout, hs.ReadTimeout)
	}
}

// TestServeShutdown runs Serve, opens a stream that outlives the grace
// period, cancels Serve's context (as SIGTERM does) and checks the stream
// ends with an in-band shutdown error and Serve returns cleanly.
func TestServeShutdown(t *testing.T) {
	v := streamtest.NewPieceVocab()
	eng := &streamtest.ScriptEngine{Script: v.IDs(strings.Split(strings.Repeat("x", 200), "")...), Interval: 10 * time.Millisecond}
	c := DefaultConfig()
	c.ModelID, c.ShutdownTimeout = "m", 100*time.Millisecond
	s, _ := New(c, slog.New(slog.DiscardHandler))
	_ = s.SetBackend(&stream.Backend{Engine: eng, Tokenizer: v, ContextLen: 64})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	rig := &testRig{url: "http://" + ln.Addr().String(), eng: eng, srv: s}
	resp := rig.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
	br := bufio.NewReader(resp.Body)
	first := ssetest.Read(t, br, 2)
	stop()
	rest := ssetest.Read(t, br, 0)
	if _, _, code, _ := contentOf(t, append(first, rest...)); code != "server_shutdown" || rest[len(rest)-1].Data != "[DONE]" {
		t.Errorf("error code %q, events %v", code, rest)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if eng.Live() != 0 || fmt.Sprint(eng.Aborts()) != fmt.Sprint([]engine.AbortCause{engine.CauseShutdown}) {
		t.Errorf("live %d aborts %v", eng.Live(), eng.Aborts())
	}
}
