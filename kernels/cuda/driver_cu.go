//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// cuDriver drives a GPU through gorgonia.org/cu: one context, one stream,
// the PTX modules JIT-compiled by the driver at open.
type cuDriver struct {
	name   string
	memory int64
	sms    int
	ctx    cu.CUContext
	stream cu.Stream
	mods   []cu.Module
	fns    map[string]cu.Function
	// scratch for Launch's argument pointers
	vals [maxArgs]uint64
	ptrs [maxArgs]unsafe.Pointer
}

// openDriver runs on the backend's locked goroutine: the context it creates
// is current on that thread only.
func openDriver(opts Options) (driver, error) {
	d := &cuDriver{fns: map[string]cu.Function{}}
	for i := range d.ptrs {
		d.ptrs[i] = unsafe.Pointer(&d.vals[i])
	}
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
	// A blocking stream: it also waits for the legacy-stream memsets and
	// synchronous copies of zero and upload.
	if d.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("cuda backend: stream: %w", err)
	}
	for _, name := range modules {
		src, err := readPTX(opts.PTXDir, name)
		if err != nil {
			return fmt.Errorf("cuda backend: PTX module %s: %w", name, err)
		}
		mod, err := cu.LoadData(string(src))
		if err != nil {
			return fmt.Errorf("cuda backend: load PTX module %s: %w", name, err)
		}
		d.mods = append(d.mods, mod)
		for _, fn := range entries(string(src)) {
			f, err := mod.Function(fn)
			if err != nil {
				return fmt.Errorf("cuda backend: kernel %s in %s: %w", fn, name, err)
			}
			d.fns[fn] = f
		}
	}
	return nil
}

func (d *cuDriver) device() (string, int64, int) { return d.name, d.memory, d.sms }
func (d *cuDriver) has(fn string) bool           { _, ok := d.fns[fn]; return ok }

func (d *cuDriver) alloc(bytes int64) (devPtr, error) {
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, fmt.Errorf("cuda backend: allocate %d bytes: %w", bytes, err)
	}
	return devPtr(p), nil
}

func (d *cuDriver) free(p devPtr) error {
	if err := cu.MemFree(cu.DevicePtr(p)); err != nil {
		return fmt.Errorf("cuda backend: free: %w", err)
	}
	return nil
}

func (d *cuDriver) zero(p devPtr, bytes int64) error {
	if err := cu.MemsetD8(cu.DevicePtr(p), 0, bytes); err != nil {
		return fmt.Errorf("cuda backend: clear %d bytes: %w", bytes, err)
	}
	return nil
}

func (d *cuDriver) upload(dst devPtr, src unsafe.Pointer, bytes int64) error {
	if err := cu.MemcpyHtoD(cu.DevicePtr(dst), src, bytes); err != nil {
		return fmt.Errorf("cuda backend: copy %d bytes to the device: %w", bytes, err)
	}
	return nil
}

// uploadAsync: from pageable memory the driver stages src before returning.
func (d *cuDriver) uploadAsync(dst devPtr, src unsafe.Pointer, bytes int64) error {
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, bytes, d.stream); err != nil {
		return fmt.Errorf("cuda backend: queue a copy of %d bytes: %w", bytes, err)
	}
	return nil
}

func (d *cuDriver) download(dst unsafe.Pointer, src devPtr, bytes int64) error {
	if err := d.sync(); err != nil {
		return err
	}
	if err := cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes); err != nil {
		return fmt.Errorf("cuda backend: copy %d bytes from the device: %w", bytes, err)
	}
	return nil
}

func (d *cuDriver) launch(fn string, grid, block [3]int, args []uint64) error {
	f, ok := d.fns[fn]
	if !ok {
		return fmt.Errorf("cuda backend: no kernel %s", fn)
	}
	copy(d.vals[:], args)
	return f.Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, d.stream, d.ptrs[:len(args)])
}

func (d *cuDriver) sync() error {
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda backend: synchronize: %w", err)
	}
	return nil
}

// close frees the modules, the stream and the context (and with it every
// allocation); errors are of no use at this point.
func (d *cuDriver) close() {
	for _, m := range d.mods {
		_ = m.Unload()
	}
	if d.stream != (cu.Stream{}) {
		_ = d.stream.Destroy()
	}
	if d.ctx != (cu.CUContext{}) {
		_ = d.ctx.Destroy()
	}
}
