//go:build !amd64 || noasm

package cpu

import "github.com/sluicehq/sluice/kernels"

// moePads: without the VNNI kernels a padded group costs more than it saves.
func moePads(kernels.DType) bool { return false }

func moeOffsetRows(kernels.DType) *[9]rowsMDot { return nil }

func moeOffset([]byte) {}
