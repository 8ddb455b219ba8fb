//go:build !amd64 || noasm

package cpu

// Off amd64 there are no tile instructions: the tiled path stays off and
// its Go form is only the tests' reference.
const useAMX = false

func amxDotTiles(c *amxCall) { amxDotTilesGo(c) }
