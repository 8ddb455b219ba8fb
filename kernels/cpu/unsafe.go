package cpu

import "unsafe"

// bytesToF32 views little-endian F32 bytes as floats without copying (model
// files are little-endian, as is every machine Sluice runs on). Unaligned data
// is copied instead, since an unaligned []float32 is not safe to use.
func bytesToF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		out := make([]float32, len(b)/4)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		return out
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
