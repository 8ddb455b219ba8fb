// Package firstcheck holds the test of scripts/device/first.sh, the GPU
// window's one command, run here against stub test binaries
// (testdata/stub) that pass, fail, hang and ignore SIGQUIT on cue, with
// stand-ins for nvidia-smi and Python: what the device will return is
// checked before a device window is spent on it.
package firstcheck
