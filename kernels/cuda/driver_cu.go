//go:build cuda

package cuda

// #cgo LDFLAGS: -lcuda
// #cgo linux CFLAGS: -I/usr/local/cuda/include
// #cgo linux LDFLAGS: -L/usr/local/cuda/lib64/stubs
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// cuDriver drives a GPU: gorgonia.org/cu for the context and memory,
// cudrv.h (kernelSet) for the modules, the stream and the launches.
type cuDriver struct {
	kernelSet
	name   string
	memory int64
	sms    int
	ctx    cu.CUContext
}

// openDriver runs on the backend's locked goroutine: the context it creates
// is current on that thread only, and cudrv.h's calls find it there.
func openDriver(opts Options) (driver, error) {
	d := &cuDriver{}
	if err := d.open(opts); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *cuDriver) open(opts Options) error {
	dev, err := cu.GetDevice(opts.Device)
	if err != nil {
		return fmt.Errorf("cuda backend: device %d: %w", opts.Device, err)
	}
	if d.name, err = dev.Name(); err != nil {
		return fmt.Errorf("cuda backend: device %d name: %w", opts.Device, err)
	}
	if d.memory, err = dev.TotalMem(); err != nil {
		return fmt.Errorf("cuda backend: device %d memory: %w", opts.Device, err)
	}
	if d.sms, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return fmt.Errorf("cuda backend: device %d SM count: %w", opts.Device, err)
	}
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("cuda backend: context on device %d: %w", opts.Device, err)
	}
	return d.kernelSet.open(opts)
}

func (d *cuDriver) device() (string, int64, int) { return d.name, d.memory, d.sms }

func (d *cuDriver) alloc(bytes int64) (devPtr, error) {
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, fmt.Errorf("cuda backend: cuMemAlloc of %d bytes: %w", bytes, err)
	}
	return devPtr(p), nil
}

func (d *cuDriver) free(p devPtr) error {
	if err := cu.MemFree(cu.DevicePtr(p)); err != nil {
		return fmt.Errorf("cuda backend: cuMemFree: %w", err)
	}
	return nil
}

func (d *cuDriver) zero(p devPtr, bytes int64) error {
	if err := cu.MemsetD8(cu.DevicePtr(p), 0, bytes); err != nil {
		return fmt.Errorf("cuda backend: cuMemsetD8 of %d bytes: %w", bytes, err)
	}
	return nil
}

func (d *cuDriver) upload(dst devPtr, src unsafe.Pointer, bytes int64) error {
	if err := cu.MemcpyHtoD(cu.DevicePtr(dst), src, bytes); err != nil {
		return fmt.Errorf("cuda backend: cuMemcpyHtoD of %d bytes: %w", bytes, err)
	}
	return nil
}

func (d *cuDriver) download(dst unsafe.Pointer, src devPtr, bytes int64) error {
	if err := d.sync(); err != nil {
		return err
	}
	if err := cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes); err != nil {
		return fmt.Errorf("cuda backend: cuMemcpyDtoH of %d bytes: %w", bytes, err)
	}
	return nil
}

// close frees the modules, the stream and the context (and with it every
// allocation); errors are of no use at this point.
func (d *cuDriver) close() {
	d.kernelSet.close()
	if d.ctx != (cu.CUContext{}) {
		_ = d.ctx.Destroy()
	}
}
