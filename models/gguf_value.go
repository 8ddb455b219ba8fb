package models

import (
	"encoding/binary"
	"fmt"
	"math"
)

// GGUF metadata values: a u32 type id, then the value. An array is an element
// type id, a u64 count and the elements without their own type ids; an array
// of arrays repeats that for each element.

// Metadata value types.
const (
	ggufUint8 uint32 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufString
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// fixedSize is the byte size of a scalar metadata type (0 for others).
func fixedSize(typ uint32) uint64 {
	switch typ {
	case ggufUint8, ggufInt8, ggufBool:
		return 1
	case ggufUint16, ggufInt16:
		return 2
	case ggufUint32, ggufInt32, ggufFloat32:
		return 4
	case ggufUint64, ggufInt64, ggufFloat64:
		return 8
	}
	return 0
}

// readValue decodes one metadata value. Scalars become the matching Go type;
// arrays become a typed slice ([]uint32, []string, ...) and arrays of arrays
// []any.
func readValue(c *cursor, typ uint32, depth int) (any, error) {
	var v any
	switch typ {
	case ggufUint8:
		v = c.u8("uint8")
	case ggufInt8:
		v = int8(c.u8("int8"))
	case ggufUint16:
		v = c.u16("uint16")
	case ggufInt16:
		v = int16(c.u16("int16"))
	case ggufUint32:
		v = c.u32("uint32")
	case ggufInt32:
		v = int32(c.u32("int32"))
	case ggufFloat32:
		v = math.Float32frombits(c.u32("float32"))
	case ggufBool:
		b := c.u8("bool")
		if c.err == nil && b > 1 {
			return nil, fmt.Errorf("bool value %d: %w", b, ErrMalformed)
		}
		v = b == 1
	case ggufString:
		v = c.str("string")
	case ggufUint64:
		v = c.u64("uint64")
	case ggufInt64:
		v = int64(c.u64("int64"))
	case ggufFloat64:
		v = math.Float64frombits(c.u64("float64"))
	case ggufArray:
		return readArray(c, depth)
	default:
		return nil, fmt.Errorf("value type %d: %w", typ, ErrMalformed)
	}
	return v, c.err
}

func readArray(c *cursor, depth int) (any, error) {
	if depth >= ggufMaxNesting {
		return nil, fmt.Errorf("arrays nested deeper than %d: %w", ggufMaxNesting, ErrMalformed)
	}
	et := c.u32("array element type")
	minSize := fixedSize(et)
	switch et {
	case ggufString:
		minSize = 8
	case ggufArray:
		minSize = 4 + 8
	}
	if c.err == nil && minSize == 0 {
		return nil, fmt.Errorf("array element type %d: %w", et, ErrMalformed)
	}
	n := c.count("array length", max(minSize, 1))
	if c.err != nil {
		return nil, c.err
	}
	if raw := fixedSize(et); raw != 0 && et != ggufBool {
		return decodeFixedArray(et, c.take(n*raw, "array"), n), c.err
	}
	switch et {
	case ggufBool:
		out := make([]bool, n)
		for i := range out {
			b := c.u8("bool")
			if c.err == nil && b > 1 {
				return nil, fmt.Errorf("bool value %d: %w", b, ErrMalformed)
			}
			out[i] = b == 1
		}
		return out, c.err
	case ggufString:
		out := make([]string, n)
		for i := range out {
			out[i] = c.str("array string")
			if c.err != nil {
				return nil, c.err
			}
		}
		return out, nil
	default: // ggufArray
		out := make([]any, n)
		for i := range out {
			v, err := readArray(c, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
}

// decodeFixedArray turns n little-endian scalars of type et into a Go slice.
func decodeFixedArray(et uint32, s []byte, n uint64) any {
	le := binary.LittleEndian
	switch et {
	case ggufUint8:
		return append([]uint8(nil), s...)
	case ggufInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(s[i])
		}
		return out
	case ggufUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(s[2*i:])
		}
		return out
	case ggufInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(s[2*i:]))
		}
		return out
	case ggufUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(s[4*i:])
		}
		return out
	case ggufInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(s[4*i:]))
		}
		return out
	case ggufFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(s[4*i:]))
		}
		return out
	case ggufUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(s[8*i:])
		}
		return out
	case ggufInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(s[8*i:]))
		}
		return out
	default: // ggufFloat64
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(s[8*i:]))
		}
		return out
	}
}
