//go:build cuda

package modeltest

import "github.com/sluicehq/sluice/models"

// testShape is the model the comparisons run: SmolLM2-135M's shape on a GPU.
func testShape() models.Config { return smolLM2() }

// emulatedModel: the tests run on the CPU emulator, where a real model's
// steps are slow enough to run fewer of them.
const emulatedModel = false
