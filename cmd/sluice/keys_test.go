package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/server"
	grpcserver "github.com/sluicehq/sluice/server/grpc"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// TestAPIKeyFile: HTTP and gRPC accept --api-key and every key of the file
// and refuse anything else; a SIGHUP swaps the file's keys on both at once
// (one shared auth.Keys); a reload that finds no key keeps the old ones;
// no key ever reaches the log.
func TestAPIKeyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# team keys\nalpha-key-1\n\n  beta-key-2  \n# gamma-key-3 retired\n")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := server.DefaultConfig()
	cfg.ModelID, cfg.APIKey = "m", "cli-key"
	var err error
	if cfg.Keys, err = loadKeys(cfg.APIKey, file, log); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	gs, err := grpcserver.New(grpcserver.Config{Addr: "127.0.0.1:0", HTTP: cfg}, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := sluicev1.NewInferenceClient(conn)

	httpOK := func(key string) bool {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /v1/models with a key: %d", resp.StatusCode)
		}
		return resp.StatusCode == http.StatusOK
	}
	grpcOK := func(key string) bool {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
		_, err := client.Tokenize(ctx, &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Text{Text: "x"}})
		switch status.Code(err) {
		case codes.Unavailable: // past the key: no model is attached
			return true
		case codes.Unauthenticated:
			return false
		}
		t.Fatalf("Tokenize: %v", err)
		return false
	}
	expect := func(when string, accepted, refused []string) {
		t.Helper()
		for _, k := range accepted {
			if !httpOK(k) || !grpcOK(k) {
				t.Errorf("%s: key %q refused (http %v, grpc %v)", when, k, httpOK(k), grpcOK(k))
			}
		}
		for _, k := range refused {
			if httpOK(k) || grpcOK(k) {
				t.Errorf("%s: key %q accepted (http %v, grpc %v)", when, k, httpOK(k), grpcOK(k))
			}
		}
	}
	expect("at start", []string{"cli-key", "alpha-key-1", "beta-key-2"},
		[]string{"gamma-key-3", "# team keys", "alpha-key", "alpha-key-1x", ""})

	reloaded := make(chan error, 1)
	reloadKeysOnHUP(ctx, cfg.Keys, file, log, func(err error) { reloaded <- err })
	hup := func() error {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		return <-reloaded
	}
	write("delta-key-4\n")
	if err := hup(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	expect("after SIGHUP", []string{"cli-key", "delta-key-4"}, []string{"alpha-key-1", "beta-key-2"})

	write("# emptied by mistake\n")
	if err := hup(); err == nil {
		t.Fatal("a reload of a file with no key succeeded")
	}
	expect("after a failed reload", []string{"cli-key", "delta-key-4"}, []string{"alpha-key-1"})

	for _, k := range []string{"cli-key", "alpha-key-1", "beta-key-2", "delta-key-4"} {
		if strings.Contains(logs.String(), k) {
			t.Errorf("the log names key %q:\n%s", k, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "api keys reloaded") {
		t.Errorf("no reload logged:\n%s", logs.String())
	}
}
