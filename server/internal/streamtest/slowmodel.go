package streamtest

import (
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// SlowModel is an engine.Model whose every forward step takes Step (fake
// time, under synctest), except its step number HangAt, which takes Hang;
// its logits always pick 'x' from a vocabulary of the 256 bytes, so
// PieceVocab decodes what it writes.
type SlowModel struct {
	Step, Hang time.Duration
	HangAt     int
	steps      int // the engine loop's goroutine only
}

func (m *SlowModel) VocabSize() int  { return 256 }
func (m *SlowModel) ContextLen() int { return 1024 }

func (m *SlowModel) Forward(b *kernels.Batch) ([]float32, error) {
	m.steps++
	if m.steps == m.HangAt {
		time.Sleep(m.Hang)
	} else {
		time.Sleep(m.Step)
	}
	logits := make([]float32, len(b.LogitRows)*m.VocabSize())
	for r := range b.LogitRows {
		logits[r*m.VocabSize()+'x'] = 1
	}
	return logits, nil
}
