package kernels

import "errors"

// ErrDeviceLost marks a backend error the backend cannot recover from: the
// device or its context is in a state no later call can use (a sticky CUDA
// error such as an illegal address, an ECC error, a lost device). A backend
// wraps it into the error a Forward returns; the engine then ends every
// sequence, reports itself broken and accepts nothing more, so the process
// can exit and be restarted instead of failing every request forever.
// Errors without it fail only the step that hit them.
var ErrDeviceLost = errors.New("kernels: device lost")
