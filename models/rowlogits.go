package models

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// RowLogits gives the logits of rows of the last ForwardDevice's batch (any
// rows, not only its LogitRows: engine.RowLogitsModel), from the hidden
// states that step left in x, through the scratch the logit rows use. It
// reads into its own host buffer, so the slice Forward returned stays as
// it was; valid until the next call.
func (m *Llama) RowLogits(rows []int32) ([]float32, error) {
	c := &m.cfg
	return rowHead{m.be, c.Arch, c.Vocab, m.opts.MaxSeqs, c.RMSEps,
		m.x, m.sel, m.outNorm, m.output, m.logits, &m.rowHost, m.finalSoftcap}.read(rows)
}

// RowLogits is Llama's, for the hybrid model (no soft-cap).
func (m *Qwen35) RowLogits(rows []int32) ([]float32, error) {
	c := &m.cfg
	return rowHead{m.be, c.Arch, c.Vocab, m.opts.MaxSeqs, c.RMSEps,
		m.x, m.sel, m.outNorm, m.output, m.logits, &m.rowHost, nil}.read(rows)
}

// rowHead is what RowLogits reads of a model: its output head and the
// buffers the logit rows use.
type rowHead struct {
	be                              kernels.Backend
	arch                            string
	vocab, maxRows                  int
	eps                             float32
	x, sel, outNorm, output, logits kernels.Tensor
	host                            *[]float32
	softcap                         func(n int) error // nil: none
}

func (h rowHead) read(rows []int32) ([]float32, error) {
	n := len(rows)
	if n == 0 || n > h.maxRows {
		return nil, fmt.Errorf("%s: %d logit rows, limit %d", h.arch, n, h.maxRows)
	}
	be := h.be
	err := firstErr(
		be.GetRows(h.sel, h.x, rows),
		be.RMSNorm(h.sel, h.sel, h.outNorm, n, h.eps),
		be.MatMul(h.logits, h.sel, h.output, nil, n),
	)
	if err == nil && h.softcap != nil {
		err = h.softcap(n)
	}
	if err == nil {
		*h.host = growRows(*h.host, n*h.vocab)
		err = be.Read(h.logits, *h.host)
	}
	if err != nil {
		return nil, fmt.Errorf("%s row logits: %w", h.arch, err)
	}
	return *h.host, nil
}

// growRows is buf at length n, allocated the first time prompt logits are
// asked for: a server that never serves them holds no second logits buffer.
func growRows(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
