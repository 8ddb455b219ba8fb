package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// ErrUnsupported is returned for a DType this package has no codec for.
var ErrUnsupported = errors.New("quant: unsupported type")

// ErrSize is returned when a buffer's length does not match the element count.
var ErrSize = errors.New("quant: size mismatch")

// Dequantize decodes len(dst) elements from src, which must hold exactly
// dt.RowBytes(len(dst)) bytes; len(dst) must be a multiple of dt.BlockElems().
func Dequantize(dt kernels.DType, src []byte, dst []float32) error {
	if err := checkSizes(dt, len(src), len(dst)); err != nil {
		return err
	}
	be, bb := dt.BlockElems(), dt.BlockBytes()
	switch dt {
	case kernels.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return nil
	case kernels.F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return nil
	case kernels.BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return nil
	}
	dec := decoders[dt]
	if dec == nil {
		return fmt.Errorf("%w: dequantize %v", ErrUnsupported, dt)
	}
	for b := 0; b < len(dst)/be; b++ {
		dec(src[b*bb:(b+1)*bb], dst[b*be:(b+1)*be])
	}
	return nil
}

// Quantize encodes src (a multiple of dt.BlockElems() elements) into a new
// buffer with the reference round-to-nearest quantizer of dt.
func Quantize(dt kernels.DType, src []float32) ([]byte, error) {
	if !dt.Known() {
		return nil, fmt.Errorf("%w: quantize %v", ErrUnsupported, dt)
	}
	if len(src)%dt.BlockElems() != 0 {
		return nil, fmt.Errorf("%w: %d elements is not a multiple of %v's block of %d", ErrSize, len(src), dt, dt.BlockElems())
	}
	dst := make([]byte, dt.RowBytes(len(src)))
	return dst, QuantizeInto(dt, dst, src)
}

// QuantizeInto is Quantize into a caller-owned buffer of dt.RowBytes(len(src)) bytes.
func QuantizeInto(dt kernels.DType, dst []byte, src []float32) error {
	if err := checkSizes(dt, len(dst), len(src)); err != nil {
		return err
	}
	be, bb := dt.BlockElems(), dt.BlockBytes()
	switch dt {
	case kernels.F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	case kernels.F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
		return nil
	case kernels.BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
		return nil
	}
	enc := encoders[dt]
	if enc == nil {
		return fmt.Errorf("%w: quantize %v", ErrUnsupported, dt)
	}
	for b := 0; b < len(src)/be; b++ {
		enc(src[b*be:(b+1)*be], dst[b*bb:(b+1)*bb])
	}
	return nil
}

func checkSizes(dt kernels.DType, nbytes, nelems int) error {
	if !dt.Known() {
		return fmt.Errorf("%w: %v", ErrUnsupported, dt)
	}
	if nelems%dt.BlockElems() != 0 {
		return fmt.Errorf("%w: %d elements is not a multiple of %v's block of %d", ErrSize, nelems, dt, dt.BlockElems())
	}
	if want := dt.RowBytes(nelems); nbytes != want {
		return fmt.Errorf("%w: %d %v elements need %d bytes, have %d", ErrSize, nelems, dt, want, nbytes)
	}
	return nil
}

// Per-block codecs: blk is one block's bytes, x its elements.
var decoders = map[kernels.DType]func(blk []byte, x []float32){
	kernels.Q4_0: dequantQ4_0,
	kernels.Q4_1: dequantQ4_1,
	kernels.Q5_0: dequantQ5_0,
	kernels.Q5_1: dequantQ5_1,
	kernels.Q8_0: dequantQ8_0,
	kernels.Q4_K: dequantQ4_K,
	kernels.Q5_K: dequantQ5_K,
	kernels.Q6_K: dequantQ6_K,
	kernels.Q8_K: dequantQ8_K,
}

var encoders = map[kernels.DType]func(x []float32, blk []byte){
	kernels.Q4_0: quantQ4_0,
	kernels.Q4_1: quantQ4_1,
	kernels.Q5_0: quantQ5_0,
	kernels.Q5_1: quantQ5_1,
	kernels.Q8_0: quantQ8_0,
	kernels.Q4_K: quantQ4_K,
	kernels.Q5_K: quantQ5_K,
	kernels.Q6_K: quantQ6_K,
	kernels.Q8_K: quantQ8_K,
}

func f16At(b []byte, off int) float32 { return F16ToF32(binary.LittleEndian.Uint16(b[off:])) }
func putF16(b []byte, off int, v float32) {
	binary.LittleEndian.PutUint16(b[off:], F32ToF16(v))
}
