package llmd

import (
	"testing"
	"time"
)

// TestChartConfigLoads runs llm-d's picker itself on each committed chart
// variant's EndpointPickerConfig (deploy/k8s/tools renders the variants
// and proves they equal deploy/k8s/manifests/): its loader accepts every
// plugin, parameter and reference, its ext_proc server comes up, and the
// precise variant's producer subscribes to every endpoint. The endpoints
// are two addresses where nothing listens: a subscription counts from its
// creation, connected or not, and nothing else here needs a replica.
func TestChartConfigLoads(t *testing.T) {
	b := binsFromEnv(t)
	for _, vr := range []struct{ name, files string }{
		{"gpu", ""},
		{"cpu", "values-cpu.yaml"},
		{"cpu-init-precise", "values-cpu.yaml,../../tools/testdata/init-precise.yaml"},
	} {
		t.Run(vr.name, func(t *testing.T) {
			pt := freePorts(t)
			cfg := renderPicker(t, b, vr.files, "{}")
			precise := hasPlugin(cfg, "precise-prefix-cache-producer")
			reps := []*replica{{ip: "127.0.0.1"}, {ip: "127.0.0.2"}}
			p := startEPP(t, b, vr.name, cfg, pt, reps, false)
			if !precise {
				return
			}
			deadline := time.Now().Add(10 * time.Second)
			for subscribers(t, pt) != 2 {
				if time.Now().After(deadline) {
					t.Fatalf("the precise config subscribes to %v endpoints, want 2:\n%s", subscribers(t, pt), p.tail())
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

func hasPlugin(cfg map[string]any, typ string) bool {
	for _, p := range cfg["plugins"].([]any) {
		if p.(map[string]any)["type"] == typ {
			return true
		}
	}
	return false
}
