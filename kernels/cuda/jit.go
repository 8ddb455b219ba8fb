//go:build cuda || cudaemu

package cuda

import "time"

// JITTime is what loading the PTX modules took when New made b: compile is
// the JIT's own report (zero where the driver's cache served the module),
// load the whole of the cuModuleLoadDataEx calls. Every Backend loads all
// modules, so with a cold driver cache (CUDA_CACHE_PATH) the first of a
// process pays the compile and the rest, in any later process too, read the
// cached cubins.
func (b *Backend) JITTime() (compile, load time.Duration) { return b.jitCompile, b.jitLoad }
