package models

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// Forward runs one step (ForwardDevice) and reads the logits of b.LogitRows
// back: [len(b.LogitRows), vocab], valid until the next call.
func (m *Llama) Forward(b *kernels.Batch) ([]float32, error) {
	logits, err := m.ForwardDevice(b)
	if err != nil {
		return nil, err
	}
	n := len(b.LogitRows) * m.cfg.Vocab
	if n > 0 {
		if err := m.be.Read(logits, m.host[:n]); err != nil {
			return nil, fmt.Errorf("%s forward: %w", m.cfg.Arch, err)
		}
	}
	return m.host[:n], nil
}

// DeviceSampler is the backend's sampler (kernels.SamplerOf), nil when the
// logits must come back to the host: a caller that has one samples the
// tensor ForwardDevice leaves instead of calling Forward.
func (m *Llama) DeviceSampler() kernels.DeviceSampler { return kernels.SamplerOf(m.be) }
