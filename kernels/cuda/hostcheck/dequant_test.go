//go:build cuda || cudaemu

package hostcheck

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// build compiles dequant_host.cu with the flags build-ptx.sh uses.
func build(t *testing.T) string {
	t.Helper()
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		t.Skip("nvcc not found")
	}
	bin := filepath.Join(t.TempDir(), "dequant_host")
	args := []string{"-O2", "-std=c++17", "-o", bin, "dequant_host.cu"}
	if out, err := exec.Command(nvcc, "--version").Output(); err == nil && bytes.Contains(out, []byte("release 11.")) {
		if _, err := exec.LookPath("g++-11"); err == nil {
			args = append(args, "-ccbin", "g++-11")
		} else {
			args = append(args, "-allow-unsupported-compiler")
		}
	}
	cmd := exec.Command(nvcc, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nvcc: %v\n%s", err, out)
	}
	return bin
}

func TestDequant16MatchesQuant(t *testing.T) {
	bin := build(t)
	r := rand.New(rand.NewPCG(5, 6))
	const cols = 1024
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q4_0, kernels.Q4_1,
		kernels.Q5_0, kernels.Q5_1, kernels.Q8_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		vals := make([]float32, cols)
		for i := range vals {
			vals[i] = float32(r.NormFloat64()) * float32(1+i%7)
		}
		row, err := quant.Quantize(dt, vals)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, cols)
		if err := quant.Dequantize(dt, row, want); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, strconv.Itoa(int(dt)), strconv.Itoa(cols))
		cmd.Stdin = bytes.NewReader(row)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil || len(out) != 4*cols {
			t.Fatalf("%v: dequant_host: %v (%d bytes)", dt, err, len(out))
		}
		for i := range want {
			got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
			if d := math.Abs(float64(got - want[i])); d > 1e-6*math.Max(1, math.Abs(float64(want[i]))) {
				t.Errorf("%v element %d: dequant16 %g, quant.Dequantize %g", dt, i, got, want[i])
				break
			}
		}
	}
}

// TestDequant16MXFP4BitExact decodes MXFP4 blocks of random bytes, every
// exponent byte 0–255 among them (the two subnormal scales, and 255, which
// ggml reads as 2^127 rather than NaN) and every code, and wants the CPU's
// decode (quant.Dequantize, ggml's dequantize_row_mxfp4) bit for bit.
func TestDequant16MXFP4BitExact(t *testing.T) {
	bin := build(t)
	r := rand.New(rand.NewPCG(7, 8))
	const blocks = 512
	cols := 32 * blocks
	row := make([]byte, blocks*quant.MXFP4BlockBytes)
	for i := range row {
		row[i] = byte(r.Uint32())
	}
	for b := range blocks {
		row[b*quant.MXFP4BlockBytes] = byte(b) // exponent b mod 256: each twice
	}
	want := make([]float32, cols)
	if err := quant.Dequantize(kernels.MXFP4, row, want); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, strconv.Itoa(int(kernels.MXFP4)), strconv.Itoa(cols))
	cmd.Stdin = bytes.NewReader(row)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil || len(out) != 4*cols {
		t.Fatalf("dequant_host: %v (%d bytes)", err, len(out))
	}
	bad := 0
	for i := range want {
		got := binary.LittleEndian.Uint32(out[4*i:])
		if w := math.Float32bits(want[i]); got != w {
			if bad++; bad <= 5 {
				t.Errorf("element %d (block %d): dequant16 %#08x (%g), quant.Dequantize %#08x (%g)", i, i/32, got,
					math.Float32frombits(got), w, want[i])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d elements differ", bad, cols)
	}
}
