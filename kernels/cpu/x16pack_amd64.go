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

//go:noescape
func dotQ4_1Q8_1X8A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X8A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X8A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X8A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1X8A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X8A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X8A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X8A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X8A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0X8A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)

func init() {
	if useVNNI512 {
		x16Layout.kernels = map[kernels.DType]*[9]groupedDot{
			kernels.Q4_1: {1: dotQ4_1Q8_1X16A1, 2: dotQ4_1Q8_1X16A2, 3: dotQ4_1Q8_1X16A3, 4: dotQ4_1Q8_1X16A4, 8: dotQ4_1Q8_1X16A8},
			kernels.Q8_0: {1: dotQ8_0Q8_0X16A1, 2: dotQ8_0Q8_0X16A2, 3: dotQ8_0Q8_0X16A3, 4: dotQ8_0Q8_0X16A4, 8: dotQ8_0Q8_0X16A8},
		}
	}
	if useAVX2 {
		x8Layout.kernels = map[kernels.DType]*[9]groupedDot{
			kernels.Q4_1: {1: dotQ4_1Q8_1X8A1, 2: dotQ4_1Q8_1X8A2, 3: dotQ4_1Q8_1X8A3, 4: dotQ4_1Q8_1X8A4, 8: dotQ4_1Q8_1X8A8},
			kernels.Q8_0: {1: dotQ8_0Q8_0X8A1, 2: dotQ8_0Q8_0X8A2, 3: dotQ8_0Q8_0X8A3, 4: dotQ8_0Q8_0X8A4, 8: dotQ8_0Q8_0X8A8},
		}
	}
	switch {
	case useVNNI512:
		grouped = &x16Layout
	case useAVX2:
		grouped = &x8Layout
	}
}
