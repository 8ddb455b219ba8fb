package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server"
)

func TestStartKVEvents(t *testing.T) {
	t.Setenv("POD_NAME", "sluice-7f9c")
	cfg := server.Config{ModelID: "SmolLM2-135M-Instruct.Q4_1", Aliases: []string{"smollm2", "smol"}}
	reg := prometheus.NewRegistry()
	p, err := startKVEvents(t.Context(), "tcp://*:0", cfg, false, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	// llm-d keys blocks by the model name requests use: the served name.
	if got := p.Topic(); got != "kv@sluice-7f9c@smollm2" {
		t.Errorf("topic %q", got)
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
	if p, err := startKVEvents(t.Context(), "", cfg, true, prometheus.NewRegistry()); p != nil || err != nil {
		t.Errorf("no endpoint: %v, %v", p, err)
	}
}
