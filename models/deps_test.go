package models

import (
	"go/build"
	"slices"
	"testing"
)

// models reads vocabularies but must not link the cgo tokenizer (design.md:
// models must not import the tokenizer), so that model and engine tests build
// without the Rust library; only its dependency-free vocab package may come in.
func TestNoTokenizerImport(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imports := range [][]string{pkg.Imports, pkg.TestImports} {
		if slices.Contains(imports, "github.com/sluicehq/sluice/tokenizer") {
			t.Errorf("models imports the tokenizer package; use tokenizer/vocab")
		}
	}
	v, err := build.Import("github.com/sluicehq/sluice/tokenizer/vocab", ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Imports) != 0 || len(v.CgoFiles) != 0 {
		t.Errorf("tokenizer/vocab imports %v (cgo files %v); it must stay dependency-free", v.Imports, v.CgoFiles)
	}
}
