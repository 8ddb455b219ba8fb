package tools

import (
	"strings"
	"testing"
)

// TestChartRefusesShortDrain: a drain delay no longer than the readiness
// probe takes to see /ready's 503 (period x failures) lets the picker send
// requests to a closed listener (make llmd-check's rolling restart got
// Envoy 503s at 5 s against 2 s x 3); the chart refuses it rather than
// render a rollout that fails requests.
func TestChartRefusesShortDrain(t *testing.T) {
	for _, c := range []struct {
		serve map[string]any
		ok    bool
	}{
		{map[string]any{"drainDelaySeconds": 5}, false},
		{map[string]any{"drainDelaySeconds": 6}, false},
		{map[string]any{"drainDelaySeconds": 7}, true},
		{map[string]any{"drainDelaySeconds": 7, "readinessPeriodSeconds": 5}, false},
		{map[string]any{}, true},
	} {
		_, err := renderWith("values-cpu.yaml", map[string]any{"serve": c.serve})
		if c.ok && err != nil {
			t.Errorf("%v: %v", c.serve, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "drainDelaySeconds")) {
			t.Errorf("%v: rendered (%v), want the drain-delay refusal", c.serve, err)
		}
	}
}
