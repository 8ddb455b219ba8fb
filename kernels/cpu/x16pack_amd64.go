//go:build amd64 && !noasm

package cpu

import "github.com/sluicehq/sluice/kernels"

//go:generate python3 gen_x16.py

//go:noescape
func dotQ4_1Q8_1X16A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X16A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X16A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X16A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X16A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X16A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X16A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X16A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X16A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X16A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

func init() {
	if !useVNNI512 {
		return
	}
	*x16Kernels[kernels.Q4_1] = [9]x16Dot{
		1: dotQ4_1Q8_1X16A1, 2: dotQ4_1Q8_1X16A2, 3: dotQ4_1Q8_1X16A3, 4: dotQ4_1Q8_1X16A4, 8: dotQ4_1Q8_1X16A8,
	}
	*x16Kernels[kernels.Q8_0] = [9]x16Dot{
		1: dotQ8_0Q8_0X16A1, 2: dotQ8_0Q8_0X16A2, 3: dotQ8_0Q8_0X16A3, 4: dotQ8_0Q8_0X16A4, 8: dotQ8_0Q8_0X16A8,
	}
}
