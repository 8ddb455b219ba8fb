//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// The backend is a kernels.DeviceSampler: Sample and MaskLogits (sample.go,
// mask.go) behind the engine-facing interface, ReadRows for the rows the
// engine samples itself, and a count of every byte downloaded.
var _ kernels.DeviceSampler = (*Backend)(nil)

// SampleRows is Sample under the interface's name.
func (b *Backend) SampleRows(logits kernels.Tensor, params []kernels.SampleParams, dst []int32) error {
	return b.Sample(logits, params, dst)
}

// LogprobRows is Logprobs under the interface's name.
func (b *Backend) LogprobRows(logits kernels.Tensor, rows []kernels.LogprobRow, dst []kernels.RowLogprobs) error {
	return b.Logprobs(logits, rows, dst)
}

// ReadRows copies the listed rows of an F32 [rows, vocab] tensor to dst,
// packed in the order listed; a run of consecutive rows is one transfer.
func (b *Backend) ReadRows(logits kernels.Tensor, rows []int32, dst []float32) error {
	lt, err := f32Of(logits, "ReadRows logits")
	if err != nil {
		return err
	}
	vocab, n := lt.cols(), lt.rows()
	if len(dst) != len(rows)*vocab {
		return fmt.Errorf("cuda backend: ReadRows: %d rows of %d logits into %d values", len(rows), vocab, len(dst))
	}
	for _, r := range rows {
		if r < 0 || int(r) >= n {
			return fmt.Errorf("cuda backend: ReadRows: row %d out of range [0,%d)", r, n)
		}
	}
	return b.do(func() error {
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && rows[j] == rows[j-1]+1 {
				j++
			}
			src := lt.ptr + devOff(4*int(rows[i])*vocab)
			if err := b.download(unsafe.Pointer(&dst[i*vocab]), src, int64(4*(j-i)*vocab)); err != nil {
				return err
			}
			i = j
		}
		return nil
	})
}

// DeviceToHostBytes is how many bytes the backend has copied from the
// device since New.
func (b *Backend) DeviceToHostBytes() int64 { return b.d2h.Load() }

// download is drv.download, counted.
func (b *Backend) download(dst unsafe.Pointer, src devPtr, bytes int64) error {
	b.d2h.Add(bytes)
	return b.drv.download(dst, src, bytes)
}
