//go:build cuda || cudaemu

package cuda

import "time"

// JITTime is what loading the modules took when New made b: compile is the
// JIT's wall time, load the whole (JIT included). A module comes from this
// process's image cache, else a prebuilt cubin for the device (sm_90,
// build-cubin.sh), else the PTX through the JIT linker (modules.go): the
// first backend of a process on a GPU without prebuilt cubins pays the
// compile, the rest load cached images (Modules says which).
func (b *Backend) JITTime() (compile, load time.Duration) { return b.jitCompile, b.jitLoad }
