// Package nvml owns Sluice's GPU figures read through NVIDIA's management
// library (github.com/NVIDIA/go-nvml): per-GPU utilization, memory, power,
// temperature and SM clock, exported as Prometheus gauges
// sluice_gpu_*{gpu="0",name="..."} and listed by `sluice inspect --gpus`.
//
// NVML is loaded at run time (dlopen of libnvidia-ml), so Sluice builds and
// runs on machines without a driver: there Open fails, Register logs one line
// and registers nothing, and no GPU series appear. That is never an error.
//
// The collector reads the devices at scrape time, not on a timer, so the
// figures are as fresh as the scrape and an idle server does no NVML calls.
// A figure a device does not support (power on some boards) is left out of
// the scrape rather than reported as 0.
//
// Concurrency: NVML is thread-safe; a Collector may be scraped concurrently.
package nvml
