package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server"
)

func TestStartKVEvents(t *testing.T) {
	t.Setenv("POD_NAME", "sluice-7f9c")
	cfg := server.Config{ModelID: "SmolLM2-135M-Instruct.Q4_1", Aliases: []string{"smollm2", "smol"}}
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f := &opsFlags{kvEvents: "tcp://127.0.0.1:0"}
	p, err := f.startKVEvents(t.Context(), cfg, false, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	// llm-d keys blocks by the model name requests use: the served name.
	if got := p.Topic(); got != "kv@sluice-7f9c@smollm2" {
		t.Errorf("topic %q", got)
	}
	if p.Addr() == nil {
		t.Error("a loopback endpoint was dialed, not bound")
	}
	if logs.Len() != 0 {
		t.Errorf("a loopback endpoint logged %s", logs.String())
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	if got := strings.Join(names, ","); got != "sluice_kv_event_batches_total,sluice_kv_events_dropped_total" {
		t.Errorf("families %s", got)
	}
	if p, err := (&opsFlags{}).startKVEvents(t.Context(), cfg, true, prometheus.NewRegistry(), log); p != nil || err != nil {
		t.Errorf("no endpoint: %v, %v", p, err)
	}
}

// TestKVEventsExposure: a wildcard endpoint still works but warns, saying
// whether subscribers need credentials; the secret file is read and checked.
func TestKVEventsExposure(t *testing.T) {
	cfg := server.Config{ModelID: "smol"}
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("indexer:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		f        opsFlags
		warn     string // a substring of the warning; "" for none
		errorHas string
	}{
		{"wildcard without secret", opsFlags{kvEvents: "tcp://*:0"}, "takes no credentials", ""},
		{"wildcard with secret", opsFlags{kvEvents: "tcp://*:0", kvSecret: secret}, "need the PLAIN credentials", ""},
		{"0.0.0.0", opsFlags{kvEvents: "tcp://0.0.0.0:0"}, "binds every interface", ""},
		{"loopback with secret", opsFlags{kvEvents: "tcp://127.0.0.1:0", kvSecret: secret}, "", ""},
		{"secret without endpoint", opsFlags{kvSecret: secret}, "", "needs --kv-events-endpoint"},
		{"empty secret", opsFlags{kvEvents: "tcp://127.0.0.1:0", kvSecret: empty}, "", "1 to 255 bytes"},
		{"missing secret file", opsFlags{kvEvents: "tcp://127.0.0.1:0", kvSecret: filepath.Join(dir, "none")}, "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			p, err := tc.f.startKVEvents(t.Context(), cfg, false, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
			if p != nil {
				defer p.Close(t.Context())
			}
			if tc.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errorHas) {
					t.Fatalf("error %v, want one saying %q", err, tc.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := logs.String(); tc.warn == "" && got != "" || tc.warn != "" && !(strings.Contains(got, "level=WARN") && strings.Contains(got, tc.warn)) {
				t.Errorf("logged %q, want a warning saying %q", got, tc.warn)
			}
		})
	}
}

// TestKVEventsReplayFlags: --kv-events-replay-endpoint opens the replay
// socket beside the PUB one, with --kv-events-buffer-steps batches kept, and
// a DEALER asking it from 0 gets the AllBlocksCleared batch the publisher
// starts with; the flag alone, or a negative buffer, is refused.
func TestKVEventsReplayFlags(t *testing.T) {
	cfg := server.Config{ModelID: "smol"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := addOpsFlags(fs)
	if err := fs.Parse([]string{"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-replay-endpoint", "tcp://127.0.0.1:0", "--kv-events-buffer-steps", "3"}); err != nil {
		t.Fatal(err)
	}
	p, err := f.startKVEvents(t.Context(), cfg, false, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	if p.ReplayAddr() == nil {
		t.Fatal("no replay socket")
	}
	// The publisher sends its first batch from its own goroutine: a
	// request that came before it was buffered would get the end marker
	// alone (seen on a loaded 2-core machine).
	for deadline := time.Now().Add(10 * time.Second); p.Batches() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the publisher sent no first batch in 10 s")
		}
	}
	dealer := zmq4.NewDealer(t.Context())
	defer dealer.Close()
	if err := dealer.Dial("tcp://" + p.ReplayAddr().String()); err != nil {
		t.Fatal(err)
	}
	if err := dealer.SendMulti(zmq4.NewMsgFrom(nil, make([]byte, 8))); err != nil {
		t.Fatal(err)
	}
	var got []int
	for {
		m, err := dealer.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, len(m.Frames))
		if len(m.Frames) == 4 && len(m.Frames[3]) == 0 { // the end marker
			break
		}
		if string(m.Frames[1]) != p.Topic() {
			t.Fatalf("replayed %q", m.Frames)
		}
	}
	if fmt.Sprint(got) != "[4 4]" {
		t.Errorf("replies of %v frames, want one batch and the end marker", got)
	}
	for _, bad := range []opsFlags{{kvReplay: "tcp://127.0.0.1:0"}, {kvEvents: "tcp://127.0.0.1:0", kvSteps: -1},
		{kvEvents: "tcp://127.0.0.1:0", kvReplay: "tcp://192.0.2.1:5558"}} {
		if p, err := bad.startKVEvents(t.Context(), cfg, false, prometheus.NewRegistry(), log); err == nil {
			p.Close(t.Context())
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestKVEventsTopicPod: the topic names the pod by name by default and, with
// --kv-events-topic-pod address, by the serving endpoint IP:PORT llm-d's
// centralized indexer keys pods by: $POD_IP when set, else --addr's IP.
func TestKVEventsTopicPod(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		mode, addr, podIP, want, errorHas string
	}{
		{"", "127.0.0.1:8080", "10.1.2.3", "kv@sluice-7f9c@smol", ""},
		{"name", "127.0.0.1:8080", "", "kv@sluice-7f9c@smol", ""},
		{"address", "0.0.0.0:8000", "10.1.2.3", "kv@10.1.2.3:8000@smol", ""},
		{"address", "127.0.0.2:8081", "", "kv@127.0.0.2:8081@smol", ""},
		{"address", "[::1]:8081", "", "kv@::1:8081@smol", ""},
		{"address", ":8000", "", "", "set $POD_IP"},
		{"address", "0.0.0.0:8000", "pod-ip", "", "set $POD_IP"},
		{"address", "10.0.0.1:0", "", "", "no fixed port"},
		{"ip", "127.0.0.1:8080", "", "", `want "name" or "address"`},
	} {
		t.Setenv("POD_NAME", "sluice-7f9c")
		t.Setenv("POD_IP", tc.podIP)
		f := opsFlags{kvEvents: "tcp://127.0.0.1:0", kvPod: tc.mode}
		p, err := f.startKVEvents(t.Context(), server.Config{ModelID: "smol", Addr: tc.addr}, false, prometheus.NewRegistry(), log)
		if tc.errorHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errorHas) {
				t.Errorf("%s %s: error %v, want one saying %q", tc.mode, tc.addr, err, tc.errorHas)
			}
			if p != nil {
				p.Close(t.Context())
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", tc.mode, tc.addr, err)
		}
		if got := p.Topic(); got != tc.want {
			t.Errorf("%s %s (POD_IP %q): topic %q, want %q", tc.mode, tc.addr, tc.podIP, got, tc.want)
		}
		p.Close(t.Context())
	}
}
