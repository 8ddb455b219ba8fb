package nvml

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports every GPU's figures at scrape time.
type Collector struct {
	lib   Library
	descs []gpuDesc
	// readErr reports a failed device listing once per scrape, as an invalid
	// metric, so promhttp shows it without dropping the engine's figures.
	readErr *prometheus.Desc
}

type gpuDesc struct {
	desc  *prometheus.Desc
	value func(GPU) float64
}

// NewCollector returns a collector over an initialized lib.
func NewCollector(lib Library) *Collector {
	labels := []string{"gpu", "name"}
	d := func(name, help string, value func(GPU) float64) gpuDesc {
		return gpuDesc{prometheus.NewDesc(name, help, labels, nil), value}
	}
	return &Collector{
		lib: lib,
		descs: []gpuDesc{
			d("sluice_gpu_utilization_ratio", "Fraction of the last sample period (driver-defined, 1/6 s to 1 s) in which a kernel ran, 0 to 1.",
				func(g GPU) float64 { return g.Utilization }),
			d("sluice_gpu_memory_used_bytes", "Device memory allocated by all processes.",
				func(g GPU) float64 { return g.MemoryUsed }),
			d("sluice_gpu_memory_total_bytes", "Device memory installed.",
				func(g GPU) float64 { return g.MemoryTotal }),
			d("sluice_gpu_power_watts", "Board power draw.",
				func(g GPU) float64 { return g.PowerWatts }),
			d("sluice_gpu_temperature_celsius", "GPU die temperature.",
				func(g GPU) float64 { return g.TempCelsius }),
			d("sluice_gpu_sm_clock_hertz", "Current SM clock.",
				func(g GPU) float64 { return g.SMClockHz }),
		},
		readErr: prometheus.NewDesc("sluice_gpu_read_error", "NVML device listing failed.", nil, nil),
	}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gpus, err := Read(c.lib)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.readErr, err)
		return
	}
	for _, g := range gpus {
		idx := strconv.Itoa(g.Index)
		for _, d := range c.descs {
			v := d.value(g)
			if math.IsNaN(v) {
				continue // unsupported on this board: no series rather than a false 0
			}
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, v, idx, g.Name)
		}
	}
}

// Register initializes lib and, when a driver answers, registers its
// collector in reg and returns the function that shuts NVML down. Without a
// driver it logs one line and returns a no-op: no GPU series, no error. The
// error is only for a collector that cannot be registered (a duplicate).
func Register(reg prometheus.Registerer, lib Library, log *slog.Logger) (shutdown func(), err error) {
	noop := func() {}
	if err := lib.Init(); err != nil {
		log.Info("nvml: no GPU figures", "reason", err)
		return noop, nil
	}
	n, err := lib.DeviceCount()
	if err != nil || n == 0 {
		log.Info("nvml: no GPU figures", "reason", reasonNoDevice(n, err))
		_ = lib.Shutdown()
		return noop, nil
	}
	if err := reg.Register(NewCollector(lib)); err != nil {
		_ = lib.Shutdown()
		return noop, fmt.Errorf("nvml: register collector: %w", err)
	}
	log.Info("nvml: exporting GPU figures", "gpus", n)
	return func() { _ = lib.Shutdown() }, nil
}

func reasonNoDevice(n int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d devices", n)
}
