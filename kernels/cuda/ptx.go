//go:build cuda

package cuda

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gorgonia.org/cu"
)

// ptxFS holds the PTX that build-ptx.sh compiled from the .cu files here
// (CUDA 11.8, sm_80); the driver JIT-compiles it for the GPU it runs on.
//
//go:embed ptx/*.ptx
var ptxFS embed.FS

// modules are the PTX modules by name; each kernel is found in one of them.
var modules = []string{"elementwise", "matmul", "attention", "sample"}

// loadModules loads every module, from dir when it is set (PTX built on the
// GPU machine by a newer nvcc, e.g. for sm_90) and from the embedded copy
// otherwise, and resolves every function each one defines.
func loadModules(dir string) (map[string]cu.Function, []cu.Module, error) {
	fns := map[string]cu.Function{}
	var mods []cu.Module
	for _, name := range modules {
		var src []byte
		var err error
		if dir != "" {
			src, err = os.ReadFile(filepath.Join(dir, name+".ptx"))
		} else {
			src, err = ptxFS.ReadFile("ptx/" + name + ".ptx")
		}
		if err != nil {
			return nil, mods, fmt.Errorf("cuda backend: PTX module %s: %w", name, err)
		}
		mod, err := cu.LoadData(string(src))
		if err != nil {
			return nil, mods, fmt.Errorf("cuda backend: load PTX module %s: %w", name, err)
		}
		mods = append(mods, mod)
		for _, fn := range entries(string(src)) {
			f, err := mod.Function(fn)
			if err != nil {
				return nil, mods, fmt.Errorf("cuda backend: kernel %s in %s: %w", fn, name, err)
			}
			fns[fn] = f
		}
	}
	return fns, mods, nil
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
