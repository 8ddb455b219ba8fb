package modeltest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// KV is one GGUF metadata entry. Value is a Go scalar (uint8 … float64, bool,
// string), a slice of one of them, or []any of slices for nested arrays.
type KV struct {
	Key   string
	Value any
}

// Tensor is one tensor to write: Shape is row-major (the last dim is GGUF's
// ne0) and Data is already in DType's layout.
type Tensor struct {
	Name  string
	DType kernels.DType
	Shape []int
	Data  []byte
}

// EncodeGGUF writes a GGUF v3 file: meta in order, then the tensor table, then
// the data section with each tensor aligned to alignment (0: 32). If meta does
// not set general.alignment and alignment is not 32, it is added.
func EncodeGGUF(w io.Writer, meta []KV, tensors []Tensor, alignment int) error {
	if alignment == 0 {
		alignment = 32
	}
	if alignment != 32 && !hasKey(meta, "general.alignment") {
		meta = append(meta, KV{"general.alignment", uint32(alignment)})
	}
	bw := bufio.NewWriter(w)
	e := &encoder{w: bw}
	e.raw([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	for _, kv := range meta {
		e.str(kv.Key)
		if err := e.value(kv.Value, true); err != nil {
			return fmt.Errorf("gguf metadata %q: %w", kv.Key, err)
		}
	}
	var off uint64
	for _, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for i := len(t.Shape) - 1; i >= 0; i-- {
			e.u64(uint64(t.Shape[i]))
		}
		e.u32(uint32(t.DType))
		e.u64(off)
		off = pad(off+uint64(len(t.Data)), uint64(alignment))
	}
	e.zeros(pad(e.n, uint64(alignment)) - e.n)
	for _, t := range tensors {
		e.raw(t.Data)
		e.zeros(pad(e.n, uint64(alignment)) - e.n)
	}
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

func hasKey(meta []KV, key string) bool {
	for _, kv := range meta {
		if kv.Key == key {
			return true
		}
	}
	return false
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

type encoder struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.n += uint64(len(b))
}

func (e *encoder) zeros(n uint64) { e.raw(make([]byte, n)) }
func (e *encoder) u8(v uint8)     { e.raw([]byte{v}) }
func (e *encoder) u16(v uint16)   { binary.LittleEndian.PutUint16(e.buf[:], v); e.raw(e.buf[:2]) }
func (e *encoder) u32(v uint32)   { binary.LittleEndian.PutUint32(e.buf[:], v); e.raw(e.buf[:4]) }
func (e *encoder) u64(v uint64)   { binary.LittleEndian.PutUint64(e.buf[:], v); e.raw(e.buf[:8]) }
func (e *encoder) str(s string)   { e.u64(uint64(len(s))); e.raw([]byte(s)) }

// GGUF metadata value type ids.
const (
	tUint8 uint32 = iota
	tInt8
	tUint16
	tInt16
	tUint32
	tInt32
	tFloat32
	tBool
	tString
	tArray
	tUint64
	tInt64
	tFloat64
)

// typeOf is the GGUF type id of a scalar or, for slices, of the array.
func typeOf(v any) (uint32, bool) {
	switch v.(type) {
	case uint8:
		return tUint8, true
	case int8:
		return tInt8, true
	case uint16:
		return tUint16, true
	case int16:
		return tInt16, true
	case uint32:
		return tUint32, true
	case int32:
		return tInt32, true
	case float32:
		return tFloat32, true
	case bool:
		return tBool, true
	case string:
		return tString, true
	case uint64:
		return tUint64, true
	case int64:
		return tInt64, true
	case float64:
		return tFloat64, true
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string, []uint64, []int64, []float64, []any:
		return tArray, true
	}
	return 0, false
}

// value writes v, preceded by its type id when typed is set (array elements
// carry no type of their own).
func (e *encoder) value(v any, typed bool) error {
	t, ok := typeOf(v)
	if !ok {
		return fmt.Errorf("cannot encode %T", v)
	}
	if typed {
		e.u32(t)
	}
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.u8(map[bool]uint8{false: 0, true: 1}[x])
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		return e.array(v)
	}
	return nil
}

func (e *encoder) array(v any) error {
	switch x := v.(type) {
	case []uint8:
		return writeArray(e, tUint8, x)
	case []int8:
		return writeArray(e, tInt8, x)
	case []uint16:
		return writeArray(e, tUint16, x)
	case []int16:
		return writeArray(e, tInt16, x)
	case []uint32:
		return writeArray(e, tUint32, x)
	case []int32:
		return writeArray(e, tInt32, x)
	case []float32:
		return writeArray(e, tFloat32, x)
	case []bool:
		return writeArray(e, tBool, x)
	case []string:
		return writeArray(e, tString, x)
	case []uint64:
		return writeArray(e, tUint64, x)
	case []int64:
		return writeArray(e, tInt64, x)
	case []float64:
		return writeArray(e, tFloat64, x)
	case []any:
		// An array of arrays: GGUF types it as array, each element then
		// carries its own element type and length.
		e.u32(tArray)
		e.u64(uint64(len(x)))
		for _, el := range x {
			t, ok := typeOf(el)
			if !ok || t != tArray {
				return fmt.Errorf("nested array element %T is not an array", el)
			}
			if err := e.array(el); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("cannot encode %T", v)
}

func writeArray[T any](e *encoder, et uint32, xs []T) error {
	e.u32(et)
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		if err := e.value(any(x), false); err != nil {
			return err
		}
	}
	return nil
}
