//go:build cuda

package cuda

// emulated: the tests run on a GPU (build tag cuda).
const emulated = false
