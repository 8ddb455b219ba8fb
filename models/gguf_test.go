package models

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

func encode(t testing.TB, meta []modeltest.KV, tensors []modeltest.Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := modeltest.EncodeGGUF(&buf, meta, tensors, 0); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func f32Tensor(name string, shape ...int) modeltest.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return modeltest.Tensor{Name: name, DType: kernels.F32, Shape: shape, Data: make([]byte, 4*n)}
}

func TestGGUFMetadataTypes(t *testing.T) {
	meta := []modeltest.KV{
		kv("u8", uint8(200)), kv("i8", int8(-100)), kv("u16", uint16(60000)), kv("i16", int16(-30000)),
		kv("u32", uint32(4e9)), kv("i32", int32(-2e9)), kv("f32", float32(1.5)), kv("b", true),
		kv("s", "héllo"), kv("u64", uint64(1)<<60), kv("i64", int64(-1)<<60), kv("f64", 2.25),
		kv("au8", []uint8{1, 2}), kv("ai32", []int32{-1, 7}), kv("af32", []float32{0.5, -1}), kv("ab", []bool{true, false}),
		kv("as", []string{"a", "", "ccc"}), kv("au64", []uint64{9}), kv("af64", []float64{0.125, -3}), kv("empty", []string{}),
		kv("nested", []any{[]uint32{1, 2}, []string{"x"}, []any{[]int8{-1}}}),
	}
	g, err := parseGGUF("meta.gguf", encode(t, meta, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Keys(), func() (k []string) {
		for _, kv := range meta {
			k = append(k, kv.Key)
		}
		return
	}()) {
		t.Errorf("keys %v", g.Keys())
	}
	for _, kv := range meta {
		got, ok := g.Meta(kv.Key)
		if !ok || !reflect.DeepEqual(got, kv.Value) {
			t.Errorf("%s = %#v, want %#v", kv.Key, got, kv.Value)
		}
	}
	helpers := []struct {
		name string
		got  any
		ok   bool
		want any
	}{
		{"Uint(u8)", first(g.Uint("u8")), second(g.Uint("u8")), uint64(200)},
		{"Uint(i32<0)", nil, second(g.Uint("i32")), nil},
		{"Int(i64)", first(g.Int("i64")), second(g.Int("i64")), int64(-1) << 60},
		{"Float(f32)", first(g.Float("f32")), second(g.Float("f32")), 1.5},
		{"Float(u16)", first(g.Float("u16")), second(g.Float("u16")), 60000.0},
		{"Float(s)", nil, second(g.Float("s")), nil},
		{"String", first(g.String("s")), second(g.String("s")), "héllo"},
		{"Strings", first(g.Strings("as")), second(g.Strings("as")), []string{"a", "", "ccc"}},
		{"Float32s(f64)", first(g.Float32s("af64")), second(g.Float32s("af64")), []float32{0.125, -3}},
		{"Int32s(u8)", first(g.Int32s("au8")), second(g.Int32s("au8")), []int32{1, 2}},
		{"Int32s(u64)", first(g.Int32s("au64")), second(g.Int32s("au64")), []int32{9}},
		{"Bool", first(g.Bool("b")), second(g.Bool("b")), true},
		{"absent", nil, second(g.String("nope")), nil},
	}
	for _, h := range helpers {
		if h.want == nil {
			if h.ok {
				t.Errorf("%s: ok, want not ok", h.name)
			}
			continue
		}
		if !h.ok || !reflect.DeepEqual(h.got, h.want) {
			t.Errorf("%s = %#v, %v; want %#v", h.name, h.got, h.ok, h.want)
		}
	}
}

func first[A, B any](a A, _ B) any   { return a }
func second[A, B any](_ A, b B) bool { return any(b).(bool) }

// patch overwrites b at the first occurrence of old (which must be unique
// enough) with new of the same length.
func patch(t *testing.T, b []byte, old, new []byte) []byte {
	t.Helper()
	i := bytes.Index(b, old)
	if i < 0 || len(old) != len(new) {
		t.Fatalf("patch: %q not found", old)
	}
	out := append([]byte(nil), b...)
	copy(out[i:], new)
	return out
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func TestGGUFRejects(t *testing.T) {
	arch := []modeltest.KV{kv("general.architecture", "llama")}
	valid := encode(t, arch, []modeltest.Tensor{f32Tensor("a.weight", 2, 8)})
	q4 := modeltest.Tensor{Name: "q.weight", DType: kernels.Q4_0, Shape: []int{1, 16}, Data: make([]byte, 9)}
	cases := []struct {
		name   string
		data   []byte
		want   error
		inText string
	}{
		{"empty", nil, ErrMalformed, "magic"},
		{"bad magic", append([]byte("GGUX"), valid[4:]...), ErrMalformed, "magic"},
		{"version 1", patch(t, valid, []byte("GGUF\x03\x00\x00\x00"), []byte("GGUF\x01\x00\x00\x00")), ErrUnsupported, "version 1"},
		{"big-endian", patch(t, valid, []byte("GGUF\x03\x00\x00\x00"), []byte("GGUF\x00\x00\x00\x03")), ErrUnsupported, "big-endian"},
		{"version 4", patch(t, valid, []byte("GGUF\x03\x00\x00\x00"), []byte("GGUF\x04\x00\x00\x00")), ErrUnsupported, "version 4"},
		{"huge tensor count", append(append([]byte("GGUF\x03\x00\x00\x00"), u64le(1<<62)...), valid[16:]...), ErrMalformed, "tensor count"},
		{"huge kv count", append(append(append([]byte(nil), valid[:16]...), u64le(1<<62)...), valid[24:]...), ErrMalformed, "metadata count"},
		{"unknown type", encode(t, arch, []modeltest.Tensor{{Name: "odd.weight", DType: 99, Shape: []int{4}, Data: make([]byte, 16)}}), ErrUnsupported, `"odd.weight": type 99`},
		{"row not a block multiple", encode(t, arch, []modeltest.Tensor{q4}), ErrMalformed, `"q.weight": row of 16`},
		{"zero dim", encode(t, arch, []modeltest.Tensor{{Name: "z", DType: kernels.F32, Shape: []int{0, 4}}}), ErrMalformed, `"z": dims`},
		{"dims overflow", encode(t, arch, []modeltest.Tensor{{Name: "big", DType: kernels.F32, Shape: []int{1 << 40, 1 << 40}}}), ErrMalformed, `"big": dims`},
		{"five dims", encode(t, arch, []modeltest.Tensor{f32Tensor("d5", 1, 1, 1, 1, 2)}), ErrMalformed, `"d5": 5 dims`},
		{"duplicate tensor", encode(t, arch, []modeltest.Tensor{f32Tensor("dup", 4), f32Tensor("dup", 4)}), ErrMalformed, `"dup" appears twice`},
		{"duplicate key", encode(t, append(arch, arch...), nil), ErrMalformed, `"general.architecture" appears twice`},
		{"bad alignment", encode(t, append(arch, kv("general.alignment", uint32(24))), nil), ErrMalformed, "general.alignment"},
		{"bad value type", patch(t, encode(t, []modeltest.KV{kv("k", uint32(1))}, nil), []byte("k\x04\x00\x00\x00"), []byte("k\x0d\x00\x00\x00")), ErrMalformed, "value type 13"},
		{"bool not 0/1", patch(t, encode(t, []modeltest.KV{kv("flag", true)}, nil), []byte("flag\x07\x00\x00\x00\x01"), []byte("flag\x07\x00\x00\x00\x02")), ErrMalformed, "bool"},
		{"string past EOF", patch(t, valid, append(u64le(8), "a.weight"...), append(u64le(1<<40), "a.weight"...)), ErrMalformed, "truncated"},
		{"misaligned offset", patch(t, encode(t, arch, []modeltest.Tensor{f32Tensor("a", 8), f32Tensor("b", 8)}),
			append([]byte("\x00\x00\x00\x00"), u64le(32)...), append([]byte("\x00\x00\x00\x00"), u64le(33)...)), ErrMalformed, `"b": offset 33`},
		{"data past EOF", valid[:len(valid)-1], ErrMalformed, `"a.weight": data`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseGGUF("bad.gguf", tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v (file %v), want %v", err, g != nil, tc.want)
			}
			if !strings.Contains(err.Error(), "bad.gguf") || !strings.Contains(err.Error(), tc.inText) {
				t.Errorf("error %q should name the file and say %q", err, tc.inText)
			}
		})
	}
}

func TestGGUFConfigErrors(t *testing.T) {
	base := []modeltest.KV{
		kv("llama.block_count", uint32(1)), kv("llama.embedding_length", uint32(8)), kv("llama.feed_forward_length", uint32(16)),
		kv("llama.attention.head_count", uint32(2)), kv("llama.context_length", uint32(32)),
		kv("llama.attention.layer_norm_rms_epsilon", float32(1e-5)),
	}
	with := func(kvs ...modeltest.KV) []modeltest.KV { return append(append([]modeltest.KV(nil), base...), kvs...) }
	without := func(key string, kvs ...modeltest.KV) []modeltest.KV {
		var out []modeltest.KV
		for _, kv := range with(kvs...) {
			if kv.Key != key {
				out = append(out, kv)
			}
		}
		return out
	}
	tok := modeltest.Tensor{Name: "token_embd.weight", DType: kernels.F32, Shape: []int{5, 8}, Data: make([]byte, 160)}
	cases := []struct {
		name   string
		meta   []modeltest.KV
		want   error
		inText string
	}{
		{"ok", with(kv("general.architecture", "llama")), nil, ""},
		{"no arch", base, ErrMissingKey, "general.architecture"},
		{"gemma", with(kv("general.architecture", "gemma")), ErrUnsupported, `"gemma"`},
		{"missing layers", without("llama.block_count", kv("general.architecture", "llama")), ErrMissingKey, "llama.block_count"},
		{"string layers", with(kv("general.architecture", "llama"), kv("llama.attention.head_count_kv", "3")), ErrMalformed, "head_count_kv"},
		{"heads not a multiple", with(kv("general.architecture", "llama"), kv("llama.attention.head_count_kv", uint32(3))), ErrMalformed, "multiple"},
		{"yarn scaling", with(kv("general.architecture", "llama"), kv("llama.rope.scaling.type", "yarn")), ErrUnsupported, "yarn"},
		{"linear scaling without factor", with(kv("general.architecture", "llama"), kv("llama.rope.scaling.type", "linear")), ErrMissingKey, "rope.scaling.factor"},
		{"llama3 scaling without factor", with(kv("general.architecture", "llama"), kv("llama.rope.scaling.type", "llama3")), ErrMissingKey, "rope.scaling.factor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseGGUF("cfg.gguf", encode(t, tc.meta, []modeltest.Tensor{tok}))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := g.Config()
			if !errors.Is(err, tc.want) || (err != nil && !strings.Contains(err.Error(), tc.inText)) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.inText)
			}
			if tc.want == nil && (cfg.Vocab != 5 || cfg.KVHeads != 2 || cfg.HeadDim != 4 || cfg.RopeTheta != 10000) {
				t.Errorf("defaults: %+v (want vocab from token_embd, kv heads = heads, head dim = hidden/heads, theta 10000)", cfg)
			}
		})
	}
}

// TestGGUFTruncated cuts a valid model at every byte of its header and at
// points through its data: every cut before the last tensor's end must fail
// with ErrMalformed, never panic; cuts in the final padding still open.
func TestGGUFTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	spec := modeltest.Spec{Layers: 1, Hidden: 32, Heads: 2, FFN: 32, Vocab: 259, Seed: 9}
	if err := modeltest.WriteGGUF(path, spec, kernels.Q4_0); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseGGUF(path, full)
	if err != nil {
		t.Fatal(err)
	}
	var end uint64
	for _, ti := range g.Tensors() {
		end = max(end, g.dataStart+ti.Offset+ti.Size)
	}
	for n := 0; n < len(full); n += 1 + n/int(g.dataStart) {
		_, err := parseGGUF(path, full[:n])
		switch {
		case uint64(n) < end && !errors.Is(err, ErrMalformed):
			t.Fatalf("cut at %d of %d: err = %v, want ErrMalformed", n, len(full), err)
		case uint64(n) >= end && err != nil:
			t.Fatalf("cut at %d (after the last tensor ends at %d): %v", n, end, err)
		}
	}
	// Once through the file system and mmap.
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	if err := os.WriteFile(cut, full[:end-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGGUF(cut); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "cut.gguf") || !strings.Contains(err.Error(), `"output.weight"`) {
		t.Errorf("OpenGGUF of a truncated file: %v", err)
	}
}

func TestGGUFClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, encode(t, nil, []modeltest.Tensor{f32Tensor("a", 4)}), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Tensor("missing"); !errors.Is(err, ErrNoTensor) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing tensor: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := g.Tensor("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Tensor after Close: %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "nope.gguf"), dir} {
		if _, err := Open(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Open(%s) = %v, want an error naming it", p, err)
		}
	}
}

func kv(key string, v any) modeltest.KV { return modeltest.KV{Key: key, Value: v} }

// TestGGUFVersion2: v2 differs from v3 only in allowing big-endian files, which
// announce themselves with a byte-swapped version; a little-endian v2 reads the same.
func TestGGUFVersion2(t *testing.T) {
	v3 := encode(t, []modeltest.KV{kv("general.architecture", "llama")}, []modeltest.Tensor{f32Tensor("a", 2, 8)})
	g, err := parseGGUF("v2.gguf", patch(t, v3, []byte("GGUF\x03"), []byte("GGUF\x02")))
	if err != nil {
		t.Fatal(err)
	}
	if ht, err := g.Tensor("a"); g.Version() != 2 || err != nil || len(ht.Data) != 64 || !reflect.DeepEqual(ht.Shape, []int{2, 8}) {
		t.Errorf("version %d, tensor %v %d bytes, %v", g.Version(), ht.Shape, len(ht.Data), err)
	}
}

func BenchmarkOpenGGUF(b *testing.B) {
	if _, err := os.Stat(defaultModel); err != nil {
		b.Skip("default model not available (make model)")
	}
	b.ReportAllocs()
	for b.Loop() {
		g, err := OpenGGUF(defaultModel)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.Vocab(); err != nil {
			b.Fatal(err)
		}
		g.Close()
	}
}
