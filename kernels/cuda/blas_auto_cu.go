//go:build cuda

package cuda

// blasAuto: on a GPU an unnamed cuBLAS is looked for on the loader's path.
const blasAuto = true
