//go:build cuda || cudaemu

package cuda

import (
	"embed"
	"os"
	"path/filepath"
	"strings"
)

// ptxFS holds the PTX that build-ptx.sh compiled from the .cu files here
// (CUDA 11.8, sm_80); the driver JIT-compiles it for the GPU it runs on.
//
//go:embed ptx/*.ptx
var ptxFS embed.FS

// modules are the PTX modules by name; each kernel is found in one of them.
var modules = []string{"elementwise", "matmul", "attention", "sample", "blas", "mask", "modelops", "logprobs", "deltanet", "gptoss"}

// readPTX returns module name's PTX: from dir when it is set (PTX built on
// the GPU machine by a newer nvcc, e.g. for sm_90), else the embedded copy.
func readPTX(dir, name string) ([]byte, error) {
	if dir != "" {
		return os.ReadFile(filepath.Join(dir, name+".ptx"))
	}
	return ptxFS.ReadFile("ptx/" + name + ".ptx")
}

// entries lists the kernel names a PTX module defines (".entry name(").
func entries(ptx string) []string {
	var names []string
	for _, line := range strings.Split(ptx, "\n") {
		line = strings.TrimSpace(line)
		i := strings.Index(line, ".entry ")
		if i < 0 {
			continue
		}
		name := strings.TrimSpace(line[i+len(".entry "):])
		if j := strings.IndexAny(name, "( "); j >= 0 {
			name = name[:j]
		}
		names = append(names, name)
	}
	return names
}
