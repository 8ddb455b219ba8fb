package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/auth"
)

// TestParseWithEnv: SLUICE_* variables set flag defaults; the command line
// wins. It runs serve's own flags.
func TestParseWithEnv(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAddr  string
		wantKeep  time.Duration
		wantAbort bool
		wantErr   bool
	}{
		{"defaults", nil, nil, "127.0.0.1:8080", 15 * time.Second, true, false},
		{"env", map[string]string{"SLUICE_ADDR": ":9", "SLUICE_KEEPALIVE": "2s", "SLUICE_ABORT_ON_DISCONNECT": "false"}, nil, ":9", 2 * time.Second, false, false},
		{"flag beats env", map[string]string{"SLUICE_ADDR": ":9"}, []string{"--addr", ":7"}, ":7", 15 * time.Second, true, false},
		{"bad env value", map[string]string{"SLUICE_KEEPALIVE": "soon"}, nil, "", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs, f := newServeFlags()
			err := parseWithEnv(fs, tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (f.cfg.Addr != tt.wantAddr || f.cfg.KeepAlive != tt.wantKeep || f.cfg.AbortOnDisconnect != tt.wantAbort) {
				t.Errorf("addr %q keepalive %v abort %v", f.cfg.Addr, f.cfg.KeepAlive, f.cfg.AbortOnDisconnect)
			}
		})
	}
}

// TestServeBindsLoopbackByDefault: with no --addr, serve (and relay mode,
// which takes the same flags) listens on 127.0.0.1 only; before, its
// default ":8080" listened on every interface.
func TestServeBindsLoopbackByDefault(t *testing.T) {
	fs, f := newServeFlags()
	if err := parseWithEnv(fs, []string{"--upstream", "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if !server.Loopback(f.cfg.Addr) || !strings.Contains(fs.Lookup("addr").Usage, "this machine only") {
		t.Fatalf("default --addr %q", f.cfg.Addr)
	}
	host, _, _ := net.SplitHostPort(f.cfg.Addr)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0")) // serve's listen, on a free port
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("listening on %v", ip)
	}
}

// TestServeSafeFlags: the edge flags reach the server's config.
func TestServeSafeFlags(t *testing.T) {
	fs, f := newServeFlags()
	if err := parseWithEnv(fs, []string{"--allowed-hosts", "a.example,b.example", "--allowed-hosts", "c.example",
		"--metrics-public", "--max-conns", "64", "--max-conns-per-ip", "8"}); err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if strings.Join(c.AllowedHosts, " ") != "a.example b.example c.example" || !c.MetricsPublic || c.MaxConns != 64 || c.MaxConnsPerIP != 8 {
		t.Errorf("config %+v", c)
	}
	fs, f = newServeFlags()
	if err := parseWithEnv(fs, nil); err != nil {
		t.Fatal(err)
	}
	if f.cfg.MetricsPublic || f.cfg.MaxConns <= 0 || len(f.cfg.AllowedHosts) != 0 {
		t.Errorf("defaults %+v", f.cfg)
	}
}

// TestWarnExposed: listening beyond loopback without a key is logged at
// start; loopback, or a key, is quiet.
func TestWarnExposed(t *testing.T) {
	keyed, err := auth.New([]string{"k"}, "")
	if err != nil {
		t.Fatal(err)
	}
	none, _ := auth.New(nil, "")
	for _, tt := range []struct {
		addr string
		keys *auth.Keys
		warn bool
	}{
		{":8080", none, true}, {"0.0.0.0:8080", none, true}, {"10.0.0.5:8080", none, true},
		{"127.0.0.1:8080", none, false}, {"localhost:8080", none, false}, {"[::1]:8080", none, false},
		{":8080", keyed, false},
	} {
		var buf bytes.Buffer
		warnExposed(tt.addr, tt.keys, slog.New(slog.NewTextHandler(&buf, nil)))
		if got := strings.Contains(buf.String(), "level=WARN"); got != tt.warn {
			t.Errorf("%s, keys %d: warned %v: %q", tt.addr, tt.keys.Count(), got, buf.String())
		}
	}
}

// TestServeSealKeyFile: --seal-key-file is read before the model loads; a
// missing file or a secret under 32 bytes stops serve with an error naming
// the flag or the length, instead of sealing under a weak or random key.
func TestServeSealKeyFile(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		filepath.Join(dir, "absent"): "--seal-key-file",
		short:                        "at least 32 bytes",
	} {
		err := runServe([]string{"--seal-key-file", file, "--model", filepath.Join(dir, "no.gguf")})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", file, err, want)
		}
	}
}
