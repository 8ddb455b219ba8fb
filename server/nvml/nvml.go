package nvml

import (
	"errors"
	"fmt"
	"math"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library is the part of NVML the collector uses. System is the real one;
// tests supply a fake, since a real driver exists only on GPU machines.
type Library interface {
	Init() error
	Shutdown() error
	DeviceCount() (int, error)
	Device(index int) (Device, error)
}

// Device is one GPU's readings. Each method fails on its own: a board that
// does not report power still reports its memory.
type Device interface {
	Name() (string, error)
	UUID() (string, error)
	Utilization() (percent uint32, err error) // GPU busy time over the driver's last sample period
	Memory() (used, total uint64, err error)  // bytes
	Power() (milliwatts uint32, err error)
	Temperature() (celsius uint32, err error) // GPU die
	SMClock() (mhz uint32, err error)         // current, not maximum
}

// GPU is one device's figures in base units. A figure the device could not
// report is NaN.
type GPU struct {
	Index       int
	Name, UUID  string
	Utilization float64 // 0-1
	MemoryUsed  float64 // bytes
	MemoryTotal float64 // bytes
	PowerWatts  float64
	TempCelsius float64
	SMClockHz   float64
}

// Read returns every device's figures. It fails only when the device list
// itself cannot be read; per-figure failures become NaN.
func Read(lib Library) ([]GPU, error) {
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("nvml: device count: %w", err)
	}
	gpus := make([]GPU, 0, n)
	for i := range n {
		d, err := lib.Device(i)
		if err != nil {
			return nil, fmt.Errorf("nvml: device %d: %w", i, err)
		}
		gpus = append(gpus, readDevice(i, d))
	}
	return gpus, nil
}

func readDevice(i int, d Device) GPU {
	g := GPU{Index: i}
	g.Name, _ = d.Name()
	g.UUID, _ = d.UUID()
	g.Utilization = scaled(d.Utilization())(0.01)
	used, total, err := d.Memory()
	g.MemoryUsed, g.MemoryTotal = orNaN(float64(used), err), orNaN(float64(total), err)
	g.PowerWatts = scaled(d.Power())(0.001)
	g.TempCelsius = scaled(d.Temperature())(1)
	g.SMClockHz = scaled(d.SMClock())(1e6)
	return g
}

// scaled turns a (reading, error) pair into a function of the unit factor,
// so readDevice stays one line per figure.
func scaled(v uint32, err error) func(float64) float64 {
	return func(unit float64) float64 { return orNaN(float64(v)*unit, err) }
}

func orNaN(v float64, err error) float64 {
	if err != nil {
		return math.NaN()
	}
	return v
}

// System is the machine's NVML, loaded from libnvidia-ml.so.1 at Init.
func System() Library { return &system{lib: gonvml.New()} }

type system struct{ lib gonvml.Interface }

// ret converts an NVML return code; SUCCESS is nil.
func ret(r gonvml.Return) error {
	if r == gonvml.SUCCESS {
		return nil
	}
	return r // gonvml.Return implements error with NVML's own message
}

func (s *system) Init() error     { return ret(s.lib.Init()) }
func (s *system) Shutdown() error { return ret(s.lib.Shutdown()) }

func (s *system) DeviceCount() (int, error) {
	n, r := s.lib.DeviceGetCount()
	return n, ret(r)
}

func (s *system) Device(i int) (Device, error) {
	d, r := s.lib.DeviceGetHandleByIndex(i)
	if err := ret(r); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("nvml: nil device handle")
	}
	return device{d}, nil
}

type device struct{ d gonvml.Device }

func (d device) Name() (string, error) { s, r := d.d.GetName(); return s, ret(r) }
func (d device) UUID() (string, error) { s, r := d.d.GetUUID(); return s, ret(r) }

func (d device) Utilization() (uint32, error) {
	u, r := d.d.GetUtilizationRates()
	return u.Gpu, ret(r)
}

func (d device) Memory() (uint64, uint64, error) {
	m, r := d.d.GetMemoryInfo()
	return m.Used, m.Total, ret(r)
}

func (d device) Power() (uint32, error) { p, r := d.d.GetPowerUsage(); return p, ret(r) }

func (d device) Temperature() (uint32, error) {
	t, r := d.d.GetTemperature(gonvml.TEMPERATURE_GPU)
	return t, ret(r)
}

func (d device) SMClock() (uint32, error) {
	c, r := d.d.GetClockInfo(gonvml.CLOCK_SM)
	return c, ret(r)
}
