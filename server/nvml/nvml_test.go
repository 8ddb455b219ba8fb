package nvml

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var errNotSupported = errors.New("Not Supported")

// fakeLib is an NVML with scripted devices: NVML itself exists only on
// machines with an NVIDIA driver.
type fakeLib struct {
	initErr, countErr error
	devs              []fakeDev
	shutdowns         int
}

func (f *fakeLib) Init() error     { return f.initErr }
func (f *fakeLib) Shutdown() error { f.shutdowns++; return nil }
func (f *fakeLib) DeviceCount() (int, error) {
	return len(f.devs), f.countErr
}
func (f *fakeLib) Device(i int) (Device, error) { return f.devs[i], nil }

type fakeDev struct {
	name              string
	util, power, temp uint32
	clock             uint32
	used, total       uint64
	powerErr, utilErr error
}

func (d fakeDev) Name() (string, error)           { return d.name, nil }
func (d fakeDev) UUID() (string, error)           { return "GPU-" + d.name, nil }
func (d fakeDev) Utilization() (uint32, error)    { return d.util, d.utilErr }
func (d fakeDev) Memory() (uint64, uint64, error) { return d.used, d.total, nil }
func (d fakeDev) Power() (uint32, error)          { return d.power, d.powerErr }
func (d fakeDev) Temperature() (uint32, error)    { return d.temp, nil }
func (d fakeDev) SMClock() (uint32, error)        { return d.clock, nil }

func TestCollectorUnits(t *testing.T) {
	lib := &fakeLib{devs: []fakeDev{
		{name: "H200", util: 87, power: 412_500, temp: 61, clock: 1980, used: 80 << 30, total: 141 << 30},
		// Power unsupported: its series is absent, not 0.
		{name: "T4", util: 3, temp: 40, clock: 585, used: 1 << 20, total: 16 << 30, powerErr: errNotSupported},
	}}
	want := `
# HELP sluice_gpu_memory_total_bytes Device memory installed.
# TYPE sluice_gpu_memory_total_bytes gauge
sluice_gpu_memory_total_bytes{gpu="0",name="H200"} 1.51397597184e+11
sluice_gpu_memory_total_bytes{gpu="1",name="T4"} 1.7179869184e+10
# HELP sluice_gpu_memory_used_bytes Device memory allocated by all processes.
# TYPE sluice_gpu_memory_used_bytes gauge
sluice_gpu_memory_used_bytes{gpu="0",name="H200"} 8.589934592e+10
sluice_gpu_memory_used_bytes{gpu="1",name="T4"} 1.048576e+06
# HELP sluice_gpu_power_watts Board power draw.
# TYPE sluice_gpu_power_watts gauge
sluice_gpu_power_watts{gpu="0",name="H200"} 412.5
# HELP sluice_gpu_sm_clock_hertz Current SM clock.
# TYPE sluice_gpu_sm_clock_hertz gauge
sluice_gpu_sm_clock_hertz{gpu="0",name="H200"} 1.98e+09
sluice_gpu_sm_clock_hertz{gpu="1",name="T4"} 5.85e+08
# HELP sluice_gpu_temperature_celsius GPU die temperature.
# TYPE sluice_gpu_temperature_celsius gauge
sluice_gpu_temperature_celsius{gpu="0",name="H200"} 61
sluice_gpu_temperature_celsius{gpu="1",name="T4"} 40
`
	c := NewCollector(lib)
	names := []string{"sluice_gpu_memory_total_bytes", "sluice_gpu_memory_used_bytes", "sluice_gpu_power_watts",
		"sluice_gpu_sm_clock_hertz", "sluice_gpu_temperature_celsius"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Utilization: percent in, ratio out (0.87 is not exact in binary, so compare with a tolerance).
	gpus, err := Read(lib)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(gpus[0].Utilization-0.87) > 1e-12 || math.Abs(gpus[1].Utilization-0.03) > 1e-12 {
		t.Errorf("utilization = %v, %v; want 0.87, 0.03", gpus[0].Utilization, gpus[1].Utilization)
	}
	if n := testutil.CollectAndCount(c, "sluice_gpu_utilization_ratio"); n != 2 {
		t.Errorf("%d utilization series, want 2", n)
	}
}

func TestCollectorListingFails(t *testing.T) {
	lib := &fakeLib{devs: []fakeDev{{name: "x"}}}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(lib)); err != nil {
		t.Fatal(err)
	}
	lib.countErr = errors.New("GPU is lost")
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "GPU is lost") {
		t.Errorf("gather error = %v, want the NVML failure", err)
	}
}

func TestRegister(t *testing.T) {
	for _, c := range []struct {
		name       string
		lib        *fakeLib
		wantSeries int // sluice_gpu_temperature_celsius series after Register
		wantLog    string
		shutdowns  int // Shutdown calls before the returned function runs
	}{
		{"no driver", &fakeLib{initErr: errors.New("ERROR_LIBRARY_NOT_FOUND")}, 0, "no GPU figures", 0},
		{"driver, no device", &fakeLib{}, 0, "no GPU figures", 1},
		{"one GPU", &fakeLib{devs: []fakeDev{{name: "H200", temp: 50}}}, 1, "exporting GPU figures", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			reg := prometheus.NewRegistry()
			shutdown, err := Register(reg, c.lib, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("Register: %v (never an error without a GPU)", err)
			}
			if lines := strings.Count(logs.String(), "\n"); lines != 1 || !strings.Contains(logs.String(), c.wantLog) {
				t.Errorf("log = %q, want one line with %q", logs.String(), c.wantLog)
			}
			if n := testutil.CollectAndCount(reg, "sluice_gpu_temperature_celsius"); n != c.wantSeries {
				t.Errorf("%d temperature series, want %d", n, c.wantSeries)
			}
			if c.lib.shutdowns != c.shutdowns {
				t.Errorf("%d Shutdown calls before close, want %d", c.lib.shutdowns, c.shutdowns)
			}
			shutdown()
		})
	}
}

// TestSystemNVML runs against the machine's real NVML. Without a driver it
// checks the promise that matters here (one log line, no series, no error)
// and skips; SLUICE_EXPECT_GPU=1 turns that skip into a failure on GPU runners.
func TestSystemNVML(t *testing.T) {
	lib := System()
	if err := lib.Init(); err != nil {
		if os.Getenv("SLUICE_EXPECT_GPU") != "" {
			t.Fatalf("SLUICE_EXPECT_GPU is set but NVML does not load: %v", err)
		}
		var logs bytes.Buffer
		reg := prometheus.NewRegistry()
		if _, err := Register(reg, lib, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("Register without a driver: %v", err)
		}
		if n := testutil.CollectAndCount(reg); n != 0 || strings.Count(logs.String(), "\n") != 1 {
			t.Fatalf("without a driver: %d series, log %q; want 0 series, one line", n, logs.String())
		}
		t.Skipf("no NVIDIA driver here (%v): checked the absent path only", err)
	}
	defer lib.Shutdown()
	gpus, err := Read(lib)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) == 0 {
		t.Skip("NVML loaded but lists no GPU")
	}
	for _, g := range gpus {
		t.Logf("gpu %d %s: util %.2f, mem %.1f/%.1f GiB, %.0f W, %.0f C, SM %.0f MHz",
			g.Index, g.Name, g.Utilization, g.MemoryUsed/(1<<30), g.MemoryTotal/(1<<30), g.PowerWatts, g.TempCelsius, g.SMClockHz/1e6)
		switch {
		case g.Name == "":
			t.Errorf("gpu %d: empty name", g.Index)
		case !(g.MemoryTotal > 1<<30) || !(g.MemoryUsed <= g.MemoryTotal):
			t.Errorf("gpu %d: memory %v used of %v", g.Index, g.MemoryUsed, g.MemoryTotal)
		case !(g.Utilization >= 0 && g.Utilization <= 1):
			t.Errorf("gpu %d: utilization %v outside [0, 1]", g.Index, g.Utilization)
		case !(g.TempCelsius > 0 && g.TempCelsius < 120):
			t.Errorf("gpu %d: temperature %v C", g.Index, g.TempCelsius)
		case !(g.SMClockHz > 1e8):
			t.Errorf("gpu %d: SM clock %v Hz", g.Index, g.SMClockHz)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(lib)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "sluice_gpu_memory_total_bytes"); n != len(gpus) {
		t.Errorf("%d memory series for %d GPUs", n, len(gpus))
	}
}

func TestInspect(t *testing.T) {
	for _, c := range []struct {
		name string
		lib  *fakeLib
		want []string
	}{
		{"no driver", &fakeLib{initErr: errors.New("ERROR_LIBRARY_NOT_FOUND")}, []string{"no NVIDIA GPU: ERROR_LIBRARY_NOT_FOUND"}},
		{"no device", &fakeLib{}, []string{"0 devices"}},
		{"power unsupported", &fakeLib{devs: []fakeDev{{name: "T4", util: 50, temp: 40, clock: 585, used: 1 << 30, total: 16 << 30, powerErr: errNotSupported}}},
			[]string{"T4", "50%", "1.0 GiB / 16.0 GiB", "n/a", "40 C", "585 MHz", "GPU-T4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Inspect(&out, c.lib); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
