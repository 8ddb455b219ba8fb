package models

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// FuzzOpenGGUF feeds arbitrary bytes to the GGUF parser and everything that
// reads its result: none of it may panic, and every tensor it hands out must
// lie inside the file with the size its type and shape imply.
//
//	go test -run '^$' -fuzz FuzzOpenGGUF -fuzztime 60s -fuzzminimizetime 2s ./models
//
// (the seeds are kilobytes: the default 60 s minimization of each new input
// leaves no time for fuzzing).
func FuzzOpenGGUF(f *testing.F) {
	dir := f.TempDir()
	specs := []struct {
		spec  modeltest.Spec
		dtype kernels.DType
	}{
		{modeltest.Spec{Layers: 1, Hidden: 32, Heads: 2, FFN: 32, Vocab: 259, Seed: 1, Tied: true}, kernels.Q4_1},
		{modeltest.Spec{Layers: 1, Hidden: 8, Heads: 2, KVHeads: 1, FFN: 8, Vocab: 259, Seed: 2, QKVBias: true}, kernels.F16},
	}
	for i, s := range specs {
		path := filepath.Join(dir, "seed.gguf")
		if err := modeltest.WriteGGUF(path, s.spec, s.dtype); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if i == 0 {
			f.Add(b[:len(b)/2])
		}
	}
	var buf bytes.Buffer
	if err := modeltest.EncodeGGUF(&buf, []modeltest.KV{kv("nested", []any{[]any{[]string{"a"}}, []uint16{1}}), kv("general.alignment", uint32(64))},
		[]modeltest.Tensor{{Name: "t", DType: kernels.Q8_0, Shape: []int{2, 32}, Data: make([]byte, 68)}}, 64); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGGUF("fuzz.gguf", data)
		if err != nil {
			return
		}
		_, _ = g.Config()
		_, _ = g.Vocab()
		for _, ti := range g.Tensors() {
			ht, err := g.Tensor(ti.Name)
			if err != nil {
				t.Fatalf("listed tensor %q: %v", ti.Name, err)
			}
			rows := 1
			for _, d := range ht.Shape[:len(ht.Shape)-1] {
				rows *= d
			}
			if want := rows * ht.DType.RowBytes(ht.Shape[len(ht.Shape)-1]); len(ht.Data) != want {
				t.Fatalf("tensor %q %v %v: %d bytes, want %d", ti.Name, ht.DType, ht.Shape, len(ht.Data), want)
			}
		}
	})
}
