package kernels

import "fmt"

// DType is a storage format. The values are GGML's type ids so that GGUF tensor
// types map onto it without a table.
type DType uint32

const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q8_0 DType = 8
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	Q8_K DType = 15
	BF16 DType = 30
	// MXFP4 is OCP's microscaling FP4 as ggml stores it (gpt-oss's expert
	// weights): blocks of 32 E2M1 values sharing one E8M0 scale
	// (kernels/quant/mxfp4.go).
	MXFP4 DType = 39
)

type dtypeInfo struct {
	name       string
	blockElems int // elements per block
	blockBytes int // bytes per block
}

var dtypes = map[DType]dtypeInfo{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", 32, 18},
	Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22},
	Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34},
	Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176},
	Q6_K: {"Q6_K", 256, 210},
	Q8_K: {"Q8_K", 256, 292},
	// One E8M0 exponent byte, then 16 bytes of 4-bit codes.
	MXFP4: {"MXFP4", 32, 17},
}

// Known reports whether Sluice understands this storage format.
func (d DType) Known() bool { _, ok := dtypes[d]; return ok }

func (d DType) String() string {
	if i, ok := dtypes[d]; ok {
		return i.name
	}
	return fmt.Sprintf("DType(%d)", uint32(d))
}

// BlockElems is the number of elements one quantization block holds (1 for plain floats).
func (d DType) BlockElems() int { return dtypes[d].blockElems }

// BlockBytes is the size in bytes of one block.
func (d DType) BlockBytes() int { return dtypes[d].blockBytes }

// RowBytes is the size in bytes of a row of n elements; n must be a multiple of BlockElems.
func (d DType) RowBytes(n int) int {
	i := dtypes[d]
	return n / i.blockElems * i.blockBytes
}
