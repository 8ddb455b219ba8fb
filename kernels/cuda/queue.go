//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"unsafe"
)

// A step is what the ops record between two flushes: kernel launches, and
// the host tables they read, packed into one int32 arena that flush copies
// to the device in a single transfer.
//
//	host:   tab = [ rows of GetRows | positions | slots, block tables ... ]
//	device: arena.ptr + 4·offset  ←  what a launch's table argument becomes
type step struct {
	launches []launch
	tab      []int32
	// the last positions and attention tables pushed, so that the 2·layers
	// RoPE calls and the layers' Attention calls of one forward pass share
	// one copy (contents are compared, never assumed)
	lastPos             []int32
	lastPosOff          int
	lastAttn            []int32
	lastAttnOff         int
	lastItems, lastRows int
	scratch             []int32 // attention tables being built
	decCuts, decZ       []int   // paged_decode's launches: item boundaries, partitions (attentionTables)
	blas                blasStep
}

// maxArgs is the most arguments a kernel here takes (SL_MAX_ARGS in cudrv.h).
const maxArgs = 24

type launch struct {
	fn          string
	grid, block [3]int
	args        [maxArgs]uint64
	nargs       int
	tables      uint32 // bit i: args[i] is an offset into tab, not a value
}

// arg is one kernel argument as the 8 bytes cu.Function.Launch copies: a
// device pointer, an integer, or a float32's bits in the low half.
type arg struct {
	v     uint64
	table bool
}

func ptrArg(p devPtr) arg  { return arg{v: uint64(p)} }
func intArg(i int) arg     { return arg{v: uint64(int64(i))} }
func f32Arg(f float32) arg { return arg{v: uint64(math.Float32bits(f))} }
func tabArg(off int) arg   { return arg{v: uint64(off), table: true} }

// maxPending bounds a step: a caller that never reads still gets its work run.
const maxPending = 1 << 14

func (b *Backend) launch(fn string, grid, block [3]int, args ...arg) error {
	if !b.drv.has(fn) {
		return fmt.Errorf("cuda backend: no kernel %s in the loaded PTX", fn)
	}
	if len(args) > maxArgs {
		return fmt.Errorf("cuda backend: kernel %s: %d arguments", fn, len(args))
	}
	l := launch{fn: fn, grid: grid, block: block, nargs: len(args)}
	for i, a := range args {
		l.args[i] = a.v
		if a.table {
			l.tables |= 1 << i
		}
	}
	b.step.launches = append(b.step.launches, l)
	if len(b.step.launches) >= maxPending {
		return b.Sync()
	}
	return nil
}

// last is the most recent launch of the step, for the ops that fuse with
// their predecessor; nil when there is none.
func (s *step) last() *launch {
	if len(s.launches) == 0 {
		return nil
	}
	return &s.launches[len(s.launches)-1]
}

// push appends v to the step's tables and returns its offset in int32s.
func (s *step) push(v []int32) int {
	off := len(s.tab)
	s.tab = append(s.tab, v...)
	return off
}

// pushPositions is push for RoPE positions, reusing an identical last copy.
func (s *step) pushPositions(pos []int32) int {
	if s.lastPos != nil && slices.Equal(s.lastPos, pos) {
		return s.lastPosOff
	}
	s.lastPosOff = s.push(pos)
	s.lastPos = s.tab[s.lastPosOff : s.lastPosOff+len(pos) : s.lastPosOff+len(pos)]
	return s.lastPosOff
}

func (s *step) reset() {
	s.launches = s.launches[:0]
	s.tab = s.tab[:0]
	s.lastPos, s.lastAttn = nil, nil
	s.blas.reset()
}

// devArena is the device copy of a step's tables, grown as needed.
type devArena struct {
	ptr   devPtr
	bytes int64
}

// devBuf is a small device buffer grown on demand (sampled token ids).
type devBuf = devArena

// ensure makes a hold at least n bytes; on the CUDA goroutine, after the
// stream has drained (it may free the old buffer).
func (b *Backend) ensure(a *devArena, n int64) error {
	if n <= a.bytes {
		return nil
	}
	n = max(n, 2*a.bytes, 1<<16)
	if a.ptr != 0 {
		if err := b.drv.sync(); err != nil {
			return err
		}
		if err := b.drv.free(a.ptr); err != nil {
			return err
		}
		b.allocs = slices.DeleteFunc(b.allocs, func(p devPtr) bool { return p == a.ptr })
		a.ptr, a.bytes = 0, 0
	}
	p, err := b.alloc(n)
	if err != nil {
		return err
	}
	a.ptr, a.bytes = p, n
	return nil
}

// flush runs on the CUDA goroutine: one copy of the tables, every launch in
// order (or as one CUDA graph when it repeats, cudrv.go), then a wait for the stream. A launch the driver refuses fails the
// step naming its kernel and arguments; a fault while the step runs surfaces
// at the wait, where only SyncEach (SLUICE_CUDA_SYNC=1: a wait after every
// launch) can tell which kernel it was. The step is emptied whatever
// happens, so a failed step does not poison the next.
func (b *Backend) flush() error {
	s := &b.step
	defer s.reset()
	if len(s.launches) == 0 {
		return nil
	}
	if n := int64(4 * len(s.tab)); n > 0 {
		if err := b.ensure(&b.arena, n); err != nil {
			return err
		}
		if err := b.drv.uploadAsync(b.arena.ptr, unsafe.Pointer(&s.tab[0]), n); err != nil {
			return fmt.Errorf("step tables: %w", err)
		}
	}
	if err := b.placeBLAS(); err != nil {
		return err
	}
	b.launches.Add(int64(len(s.launches)))
	run := func() error { return b.drv.run(s.launches, b.arena.ptr, b.opts.SyncEach) }
	// A step with cuBLAS calls is captured too when the handle has our
	// workspace (blasLib.capture). Should cuBLAS refuse a capture anyway,
	// nothing ran (no graph was made): the step runs uncaptured, and so do
	// later steps with GEMMs.
	var err error
	if b.graphs && !b.opts.SyncEach && (!s.blas.used || b.blas.capture) {
		before := b.drv.graphStats()
		err = b.drv.replay(s.launches, b.arena.ptr)
		if err != nil && s.blas.used && b.drv.graphStats() == before {
			slog.Warn("cuda backend: a step with cuBLAS GEMMs could not be captured; they run outside graphs from now on", "err", err)
			b.blas.capture = false
			err = run()
		}
	} else {
		err = run()
	}
	if err != nil {
		return err
	}
	if err := b.drv.sync(); err != nil {
		return &LaunchError{Of: len(s.launches), Err: err}
	}
	return nil
}

// devOff is a byte offset into a device allocation.
func devOff(n int) devPtr { return devPtr(n) }
