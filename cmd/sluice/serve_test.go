package main

import (
	"flag"
	"testing"
	"time"
)

// TestParseWithEnv: SLUICE_* variables set flag defaults; the command line wins.
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
		{"defaults", nil, nil, ":8080", 15 * time.Second, true, false},
		{"env", map[string]string{"SLUICE_ADDR": ":9", "SLUICE_KEEPALIVE": "2s", "SLUICE_ABORT_ON_DISCONNECT": "false"}, nil, ":9", 2 * time.Second, false, false},
		{"flag beats env", map[string]string{"SLUICE_ADDR": ":9"}, []string{"--addr", ":7"}, ":7", 15 * time.Second, true, false},
		{"bad env value", map[string]string{"SLUICE_KEEPALIVE": "soon"}, nil, "", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			addr := fs.String("addr", ":8080", "")
			keep := fs.Duration("keepalive", 15*time.Second, "")
			abort := fs.Bool("abort-on-disconnect", true, "")
			err := parseWithEnv(fs, tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (*addr != tt.wantAddr || *keep != tt.wantKeep || *abort != tt.wantAbort) {
				t.Errorf("addr %q keepalive %v abort %v", *addr, *keep, *abort)
			}
		})
	}
}
