package models

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"os"
	"syscall"

	"github.com/sluicehq/sluice/kernels"
)

// GGUF layout (all little-endian, versions 2 and 3):
//
//	magic "GGUF" | version u32 | n_tensors u64 | n_kv u64
//	n_kv × (key string, type u32, value)
//	n_tensors × (name string, n_dims u32, ne[n_dims] u64, type u32, offset u64)
//	padding to general.alignment
//	data section: each tensor at data_start + offset (offset % alignment == 0)
//
// A string is a u64 length and that many bytes; dims are listed fastest-varying
// first (ne0 = row length).

const (
	ggufMagic        = "GGUF"
	ggufMaxDims      = 4  // GGML_MAX_DIMS
	ggufMaxNesting   = 16 // arrays of arrays; deeper is hostile input
	ggufDefaultAlign = 32
)

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	DType  kernels.DType
	Shape  []int  // row-major: the last dim is GGUF's ne0
	Offset uint64 // from the start of the data section
	Size   uint64 // bytes
}

// GGUFFile is an open GGUF file, mapped read-only. Metadata is decoded at open
// (copied out of the map); tensor data is handed out as slices of the map and
// is valid until Close. Not safe for concurrent use with Close.
type GGUFFile struct {
	path      string
	data      []byte // the mmap; nil after Close
	unmap     bool   // data came from syscall.Mmap
	version   uint32
	keys      []string // metadata keys in file order
	meta      map[string]any
	tensors   []TensorInfo
	byName    map[string]int
	alignment uint64
	dataStart uint64
}

// OpenGGUF maps path and parses its header, metadata and tensor table.
func OpenGGUF(path string) (*GGUFFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	if st.Size() < 24 {
		return nil, fmt.Errorf("gguf %s: %d bytes is too short for a header: %w", path, st.Size(), ErrMalformed)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("gguf %s: file too large to map: %w", path, ErrUnsupported)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: mmap: %w", path, err)
	}
	g, err := parseGGUF(path, data)
	if err != nil {
		_ = syscall.Munmap(data)
		return nil, err
	}
	g.unmap = true
	return g, nil
}

// Close unmaps the file. Tensor data handed out earlier must not be used after.
func (g *GGUFFile) Close() error {
	if g.data == nil {
		return nil
	}
	data := g.data
	g.data = nil
	if !g.unmap {
		return nil
	}
	if err := syscall.Munmap(data); err != nil {
		return fmt.Errorf("gguf %s: munmap: %w", g.path, err)
	}
	return nil
}

// Path is the file's path.
func (g *GGUFFile) Path() string { return g.path }

// Version is the GGUF format version (2 or 3).
func (g *GGUFFile) Version() uint32 { return g.version }

// Alignment is the data section's alignment (general.alignment, default 32).
func (g *GGUFFile) Alignment() int { return int(g.alignment) }

// Tensors lists the tensor table in file order.
func (g *GGUFFile) Tensors() []TensorInfo { return g.tensors }

// Has reports whether the file holds a tensor called name.
func (g *GGUFFile) Has(name string) bool { _, ok := g.byName[name]; return ok }

// Tensor returns the named tensor; its Data is a slice of the mmap.
func (g *GGUFFile) Tensor(name string) (kernels.HostTensor, error) {
	i, ok := g.byName[name]
	if !ok {
		return kernels.HostTensor{}, fmt.Errorf("gguf %s: tensor %q: %w", g.path, name, ErrNoTensor)
	}
	if g.data == nil {
		return kernels.HostTensor{}, fmt.Errorf("gguf %s: tensor %q: %w", g.path, name, ErrClosed)
	}
	t := g.tensors[i]
	start := g.dataStart + t.Offset // bounds were checked at open
	end := start + t.Size
	return kernels.HostTensor{
		Name:  t.Name,
		DType: t.DType,
		Shape: append([]int(nil), t.Shape...),
		Data:  g.data[start:end:end],
	}, nil
}

// cursor reads GGUF primitives; the first error sticks and later reads
// return zero values, so parsing code checks once per record.
type cursor struct {
	b   []byte
	off uint64
	err error
}

func (c *cursor) left() uint64 { return uint64(len(c.b)) - c.off }

func (c *cursor) take(n uint64, what string) []byte {
	if c.err != nil {
		return nil
	}
	if n > c.left() {
		c.err = fmt.Errorf("%s at byte %d needs %d bytes, %d left (truncated file): %w", what, c.off, n, c.left(), ErrMalformed)
		return nil
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	return s
}

func (c *cursor) u8(what string) uint8 {
	if s := c.take(1, what); s != nil {
		return s[0]
	}
	return 0
}

func (c *cursor) u16(what string) uint16 {
	if s := c.take(2, what); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

func (c *cursor) u32(what string) uint32 {
	if s := c.take(4, what); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (c *cursor) u64(what string) uint64 {
	if s := c.take(8, what); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (c *cursor) str(what string) string {
	n := c.u64(what + " length")
	return string(c.take(n, what))
}

// count reads an element count and checks that count elements of at least
// minSize bytes each fit in what is left, so hostile counts cannot make the
// parser allocate more than the file's size.
func (c *cursor) count(what string, minSize uint64) uint64 {
	n := c.u64(what)
	if c.err == nil && n > c.left()/minSize {
		c.err = fmt.Errorf("%s %d cannot fit in the %d bytes left: %w", what, n, c.left(), ErrMalformed)
		return 0
	}
	return n
}

func parseGGUF(path string, b []byte) (*GGUFFile, error) {
	c := &cursor{b: b}
	if magic := c.take(4, "magic"); c.err != nil || string(magic) != ggufMagic {
		return nil, fmt.Errorf("gguf %s: bad magic %q, not a GGUF file: %w", path, magic, ErrMalformed)
	}
	g := &GGUFFile{path: path, data: b, meta: map[string]any{}, byName: map[string]int{}, alignment: ggufDefaultAlign}
	g.version = c.u32("version")
	if sw := bits.ReverseBytes32(g.version); c.err == nil && (sw == 2 || sw == 3) {
		return nil, fmt.Errorf("gguf %s: big-endian file (version %d): %w", path, sw, ErrUnsupported)
	}
	if c.err == nil && g.version != 2 && g.version != 3 {
		return nil, fmt.Errorf("gguf %s: version %d (want 2 or 3): %w", path, g.version, ErrUnsupported)
	}
	nTensors := c.count("tensor count", 8+4+8+4+8)
	nKV := c.count("metadata count", 8+4+1)
	if c.err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, c.err)
	}
	if err := g.parseMeta(c, nKV); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := g.readAlignment(); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := g.parseTensorInfos(c, nTensors); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	g.dataStart = alignUp(c.off, g.alignment)
	if err := g.checkTensorBounds(); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	return g, nil
}

func alignUp(off, align uint64) uint64 {
	if r := off % align; r != 0 {
		return off + align - r
	}
	return off
}

func (g *GGUFFile) parseMeta(c *cursor, n uint64) error {
	g.keys = make([]string, 0, n)
	for i := uint64(0); i < n; i++ {
		key := c.str("metadata key")
		typ := c.u32("metadata type")
		if c.err != nil {
			return fmt.Errorf("metadata entry %d: %w", i, c.err)
		}
		v, err := readValue(c, typ, 0)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		if _, dup := g.meta[key]; dup {
			return fmt.Errorf("metadata key %q appears twice: %w", key, ErrMalformed)
		}
		g.meta[key] = v
		g.keys = append(g.keys, key)
	}
	return nil
}

func (g *GGUFFile) readAlignment() error {
	v, ok := g.meta["general.alignment"]
	if !ok {
		return nil
	}
	a, ok := asUint(v)
	if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
		return fmt.Errorf("general.alignment %v is not a power of two: %w", v, ErrMalformed)
	}
	g.alignment = a
	return nil
}

func (g *GGUFFile) parseTensorInfos(c *cursor, n uint64) error {
	g.tensors = make([]TensorInfo, 0, n)
	for i := uint64(0); i < n; i++ {
		name := c.str("tensor name")
		nDims := c.u32("tensor dims")
		if c.err != nil {
			return fmt.Errorf("tensor %d: %w", i, c.err)
		}
		if nDims == 0 || nDims > ggufMaxDims {
			return fmt.Errorf("tensor %q: %d dims (want 1..%d): %w", name, nDims, ggufMaxDims, ErrMalformed)
		}
		ne := make([]uint64, nDims)
		for d := range ne {
			ne[d] = c.u64("tensor dim")
		}
		dt := kernels.DType(c.u32("tensor type"))
		off := c.u64("tensor offset")
		if c.err != nil {
			return fmt.Errorf("tensor %q: %w", name, c.err)
		}
		t, err := tensorInfo(name, ne, dt, off, g.alignment)
		if err != nil {
			return err
		}
		if _, dup := g.byName[name]; dup {
			return fmt.Errorf("tensor %q appears twice: %w", name, ErrMalformed)
		}
		g.byName[name] = len(g.tensors)
		g.tensors = append(g.tensors, t)
	}
	return nil
}

// maxElems bounds a tensor's element count so that sizes in bytes cannot
// overflow int64 whatever the type.
const maxElems = 1 << 52

func tensorInfo(name string, ne []uint64, dt kernels.DType, off, align uint64) (TensorInfo, error) {
	if !dt.Known() {
		return TensorInfo{}, fmt.Errorf("tensor %q: type %d: %w", name, uint32(dt), ErrUnsupported)
	}
	elems := uint64(1)
	for _, d := range ne {
		hi, lo := bits.Mul64(elems, d)
		if d == 0 || hi != 0 || lo > maxElems {
			return TensorInfo{}, fmt.Errorf("tensor %q: dims %v are zero or overflow: %w", name, ne, ErrMalformed)
		}
		elems = lo
	}
	be := uint64(dt.BlockElems())
	if ne[0]%be != 0 {
		return TensorInfo{}, fmt.Errorf("tensor %q: row of %d elements is not a multiple of %s's block of %d: %w", name, ne[0], dt, be, ErrMalformed)
	}
	if off%align != 0 {
		return TensorInfo{}, fmt.Errorf("tensor %q: offset %d is not a multiple of the alignment %d: %w", name, off, align, ErrMalformed)
	}
	shape := make([]int, len(ne))
	for i, d := range ne {
		shape[len(ne)-1-i] = int(d)
	}
	return TensorInfo{Name: name, DType: dt, Shape: shape, Offset: off, Size: elems / be * uint64(dt.BlockBytes())}, nil
}

func (g *GGUFFile) checkTensorBounds() error {
	n := uint64(len(g.data))
	for _, t := range g.tensors {
		if g.dataStart > n || t.Offset > n-g.dataStart || t.Size > n-g.dataStart-t.Offset {
			return fmt.Errorf("tensor %q: data [%d, +%d) beyond the end of the file at %d (truncated file): %w",
				t.Name, g.dataStart+t.Offset, t.Size, n, ErrMalformed)
		}
	}
	return nil
}
