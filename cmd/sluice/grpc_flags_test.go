package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
)

func TestOpsFlags(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name    string
		args    []string
		wantErr bool
		vllm    bool
		served  []string // --served-model-name: series are labelled with the first
	}{
		{"metrics only", nil, false, false, nil},
		{"vllm names and gRPC", []string{"--metrics-compat=vllm", "--grpc-addr=127.0.0.1:0"}, false, true, nil},
		{"served name", nil, false, false, []string{"smol", "other"}},
		{"unknown compat", []string{"--metrics-compat=tgi"}, true, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f := addOpsFlags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			cfg := server.DefaultConfig()
			cfg.ModelID, cfg.Aliases = "m", c.served
			label := "m"
			if len(c.served) > 0 {
				label = c.served[0]
			}
			srv, err := server.New(cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var lo loader.Options
			o, err := f.start(ctx, cfg, srv, &lo, log)
			if c.wantErr {
				cancel()
				if err == nil {
					t.Fatal("start accepted a bad flag")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lo.Observer == nil {
				t.Error("the engine observer was not set")
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			body := rec.Body.String()
			if rec.Code != http.StatusOK || !strings.Contains(body, `sluice_requests_running{model="`+label+`"} 0`) {
				t.Errorf("GET /metrics: %d\n%s", rec.Code, body)
			}
			if got := strings.Contains(body, "vllm:num_requests_waiting"); got != c.vllm {
				t.Errorf("vLLM names exported: %v, want %v", got, c.vllm)
			}
			if (o.grpc != nil) != (f.grpcAddr != "") {
				t.Errorf("gRPC endpoint started: %v, --grpc-addr %q", o.grpc != nil, f.grpcAddr)
			}
			cancel()
			if err := o.wait(); err != nil {
				t.Errorf("wait: %v", err)
			}
		})
	}
}
