package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

// A hybrid model's recurrent-state slots are exported from the same
// snapshot as the blocks; a model without state exports neither family.
func TestStateSlots(t *testing.T) {
	const slots, size = "sluice_state_slots", "sluice_state_slot_bytes"
	m := newTest(t, Options{})
	st := &engine.Stats{KV: kvcache.Usage{Total: 64, Free: 60, Used: 4, StatesTotal: 12, StatesUsed: 3, StatesCached: 2},
		StateSlotBytes: 20 << 20}
	m.SetSource(func() *engine.Stats { return st })
	fams := metricstest.Scrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{slots, []string{"model", "smol", "state", "used"}, 3},
		{slots, []string{"model", "smol", "state", "cached"}, 2},
		{slots, []string{"model", "smol", "state", "total"}, 12},
		{size, []string{"model", "smol"}, 20 << 20},
	} {
		if got := fams.Value(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
		if got := fams[c.name].GetType(); got != dto.MetricType_GAUGE {
			t.Errorf("%s type %v, want gauge", c.name, got)
		}
	}
	if n := len(fams[slots].GetMetric()); n != 3 {
		t.Errorf("%s has %d series, want used, cached, total", slots, n)
	}

	st = &engine.Stats{KV: kvcache.Usage{Total: 64, Free: 64}}
	fams = metricstest.Scrape(t, m.Handler())
	for _, name := range []string{slots, size} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exported for a model without recurrent state", name)
		}
	}
}
