//go:build cuda || cudaemu

package cuda

// #include <stdlib.h>
// #include "cudrv.h"
import "C"

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// cubinEmbed holds the prebuilt cubins build-cubin.sh wrote into cubin/
// (not committed; the directory's README keeps the pattern matching):
//
//	cubin/<module>.<sha256(PTX)[:16]>.sm_<XY>.cubin
//
//go:embed cubin
var cubinEmbed embed.FS

// cubinFS is where prebuilt cubins are looked up (a test swaps it).
var cubinFS fs.FS = cubinEmbed

// ModuleLoad says how one module reached a backend, for the device
// summary: From is "cubin <file>" (prebuilt, no JIT), "PTX JIT" (compiled
// here, with why a prebuilt cubin was not used when there was one), or
// "cache" (an image this process compiled or loaded before, for the same
// PTX and device).
type ModuleLoad struct {
	Name, From    string
	Compile, Load time.Duration
}

// imageKey names a module's device image: the PTX it was built from and
// the compute capability (major·10 + minor) it was built for.
type imageKey struct {
	sum [sha256.Size]byte
	cc  int
}

// images caches every module image (cubin) a backend of this process
// loaded, so that the next backend on the same kind of device loads it
// without a JIT: a CUmodule belongs to its context, an image does not. The
// op tests create dozens of backends; without it each JIT-compiles 8.5 MB
// of PTX.
var images struct {
	sync.Mutex
	m map[imageKey][]byte
}

// embeddedSums memoizes the embedded PTX's digests (a PTXDir's are taken
// afresh: its files may change between backends).
var embeddedSums sync.Map // module name → [sha256.Size]byte

func ptxSum(dir, name string, src []byte) [sha256.Size]byte {
	if dir != "" {
		return sha256.Sum256(src)
	}
	if s, ok := embeddedSums.Load(name); ok {
		return s.([sha256.Size]byte)
	}
	s := sha256.Sum256(src)
	embeddedSums.Store(name, s)
	return s
}

func cachedImage(k imageKey) []byte {
	images.Lock()
	defer images.Unlock()
	return images.m[k]
}

func cacheImage(k imageKey, img []byte) {
	images.Lock()
	defer images.Unlock()
	if images.m == nil {
		images.m = map[imageKey][]byte{}
	}
	images.m[k] = img
}

// prebuilt finds module name's cubin for the PTX of digest sum on a device
// of compute capability cc: built for cc itself, else for an earlier minor
// version of the same major one (SASS runs on later minors, not across
// majors). ok is false when there is none.
func prebuilt(name string, sum [sha256.Size]byte, cc int) (img []byte, file string, ok bool) {
	h := hex.EncodeToString(sum[:8])
	for sm := cc; sm >= cc/10*10; sm-- {
		file = fmt.Sprintf("cubin/%s.%s.sm_%d.cubin", name, h, sm)
		if img, err := fs.ReadFile(cubinFS, file); err == nil {
			return img, file, true
		}
	}
	return nil, "", false
}

// loadModule gets module name (PTX src) into the current context: the
// cached image, else the prebuilt cubin for this device, else the PTX
// compiled by the JIT linker (whose cubin is then cached). A cubin the
// driver refuses (a wrong arch, a driver too old for it) falls back to the
// JIT, and the refusal is kept in the ModuleLoad.
func (k *kernelSet) loadModule(name string, src []byte, sum [sha256.Size]byte) (C.CUmodule, ModuleLoad, error) {
	ml := ModuleLoad{Name: name}
	key := imageKey{sum, k.cc}
	t0 := time.Now()
	if img := cachedImage(key); img != nil {
		m, err := k.loadImage(img)
		if err == nil {
			ml.From, ml.Load = "cache", time.Since(t0)
			return m, ml, nil
		}
		ml.From = fmt.Sprintf("PTX JIT (cached image refused: %v)", err)
	} else if img, file, ok := prebuilt(name, sum, k.cc); ok {
		m, err := k.loadImage(img)
		if err == nil {
			cacheImage(key, img)
			ml.From, ml.Load = "cubin "+strings.TrimPrefix(file, "cubin/"), time.Since(t0)
			return m, ml, nil
		}
		ml.From = fmt.Sprintf("PTX JIT (%s refused: %v)", strings.TrimPrefix(file, "cubin/"), err)
	} else {
		ml.From = "PTX JIT"
	}
	tj := time.Now()
	img, err := k.jit(src)
	ml.Compile = time.Since(tj)
	if err != nil {
		return nil, ml, err
	}
	atomic.AddInt64(&jitCompiles, 1)
	m, err := k.loadImage(img)
	if err != nil {
		return nil, ml, fmt.Errorf("the JIT's own cubin: %w", err)
	}
	cacheImage(key, img)
	ml.Load = time.Since(t0)
	return m, ml, nil
}

// jitCompiles counts the PTX modules this process JIT-compiled.
var jitCompiles int64

// jit compiles PTX for the current device and returns its cubin.
func (k *kernelSet) jit(src []byte) ([]byte, error) {
	cs := C.CString(string(src))
	defer C.free(unsafe.Pointer(cs))
	var state C.CUlinkState
	var cubin unsafe.Pointer
	var n C.size_t
	r := C.sl_jit_ptx(cs, C.size_t(len(src)+1), k.info, k.elog, jitLogBytes, &state, &cubin, &n)
	defer func() {
		if state != nil {
			C.cuLinkDestroy(state)
		}
	}()
	if r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("%w%s", cuError("cuLinkComplete (JIT of the PTX)", r),
			jitLog("error", C.GoString(k.elog))+jitLog("info", C.GoString(k.info)))
	}
	return C.GoBytes(cubin, C.int(n)), nil
}

// loadImage loads a cubin into the current context.
func (k *kernelSet) loadImage(img []byte) (C.CUmodule, error) {
	var m C.CUmodule
	var ms C.float
	ci := C.CBytes(img)
	defer C.free(ci)
	if r := C.sl_load_module(&m, (*C.char)(ci), k.info, k.elog, jitLogBytes, &ms); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("%w%s", cuError("cuModuleLoadDataEx", r), jitLog("error", C.GoString(k.elog)))
	}
	return m, nil
}

// Modules says how each module was loaded (ModuleLoad), in load order.
func (b *Backend) Modules() []ModuleLoad { return b.modLoads }
