package models

import "fmt"

// RowLogits gives the logits of rows of the last ForwardDevice's batch (any
// rows, not only its LogitRows: engine.RowLogitsModel), from the hidden
// states that step left in x, through the scratch the logit rows use. It
// reads into its own host buffer, so the slice Forward returned stays as
// it was; valid until the next call.
func (m *Llama) RowLogits(rows []int32) ([]float32, error) {
	n := len(rows)
	if n == 0 || n > m.opts.MaxSeqs {
		return nil, fmt.Errorf("%s: %d logit rows, limit %d", m.cfg.Arch, n, m.opts.MaxSeqs)
	}
	c, be := &m.cfg, m.be
	err := firstErr(
		be.GetRows(m.sel, m.x, rows),
		be.RMSNorm(m.sel, m.sel, m.outNorm, n, c.RMSEps),
		be.MatMul(m.logits, m.sel, m.output, nil, n),
		m.finalSoftcap(n),
	)
	if err == nil {
		m.rowHost = growRows(m.rowHost, n*c.Vocab)
		err = be.Read(m.logits, m.rowHost)
	}
	if err != nil {
		return nil, fmt.Errorf("%s row logits: %w", c.Arch, err)
	}
	return m.rowHost, nil
}

// RowLogits is Llama's, for the hybrid model (no soft-cap).
func (m *Qwen35) RowLogits(rows []int32) ([]float32, error) {
	n := len(rows)
	if n == 0 || n > m.opts.MaxSeqs {
		return nil, fmt.Errorf("%s: %d logit rows, limit %d", m.cfg.Arch, n, m.opts.MaxSeqs)
	}
	c, be := &m.cfg, m.be
	err := firstErr(
		be.GetRows(m.sel, m.x, rows),
		be.RMSNorm(m.sel, m.sel, m.outNorm, n, c.RMSEps),
		be.MatMul(m.logits, m.sel, m.output, nil, n),
	)
	if err == nil {
		m.rowHost = growRows(m.rowHost, n*c.Vocab)
		err = be.Read(m.logits, m.rowHost)
	}
	if err != nil {
		return nil, fmt.Errorf("%s row logits: %w", c.Arch, err)
	}
	return m.rowHost, nil
}

// growRows is buf at length n, allocated the first time prompt logits are
// asked for: a server that never serves them holds no second logits buffer.
func growRows(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
