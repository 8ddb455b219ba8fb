package faultinject

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// constModel returns the same logits at every step.
type constModel struct{ logits []float32 }

func (m constModel) Forward(*kernels.Batch) ([]float32, error) { return m.logits, nil }
func (m constModel) VocabSize() int                            { return len(m.logits) }
func (m constModel) ContextLen() int                           { return 64 }

func TestPlans(t *testing.T) {
	inner := constModel{logits: []float32{1, 2, 3}}
	m := Wrap(inner, func(step int) Fault {
		switch {
		case step == 2:
			return Fault{Kind: Fail}
		case step == 4:
			return Fault{Kind: Panic}
		case step == 5:
			return Fault{Kind: DeviceLost}
		}
		return Every(3, Fault{Kind: Fail})(step)
	})
	forward := func() (out []float32, err error, panicked bool) {
		defer func() {
			if r := recover(); r != nil {
				panicked = true
			}
		}()
		out, err = m.Forward(&kernels.Batch{})
		return out, err, false
	}
	for step := 1; step <= 7; step++ {
		out, err, panicked := forward()
		switch step {
		case 1, 7:
			if err != nil || panicked || !slices.Equal(out, inner.logits) {
				t.Fatalf("step %d: %v %v %v, want the inner model's logits untouched", step, out, err, panicked)
			}
		case 2, 3, 6:
			if !errors.Is(err, ErrInjected) || out != nil {
				t.Fatalf("step %d: %v %v, want ErrInjected and no logits", step, out, err)
			}
		case 4:
			if !panicked {
				t.Fatalf("step 4 did not panic")
			}
		case 5:
			if !errors.Is(err, kernels.ErrDeviceLost) {
				t.Fatalf("step 5: %v, want ErrDeviceLost", err)
			}
		}
	}
	if m.Steps() != 7 || m.Faults() != 5 {
		t.Fatalf("Steps %d Faults %d, want 7 and 5", m.Steps(), m.Faults())
	}
	if At(Fault{Kind: Fail}, 3)(2).Kind != None || At(Fault{Kind: Fail}, 3)(3).Kind != Fail || Every(0, Fault{Kind: Fail})(5).Kind != None {
		t.Fatal("At/Every chose the wrong steps")
	}
}
