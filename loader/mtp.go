package loader

import (
	"fmt"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/models"
)

// loadMTP readies, for speculative method mtp, the target's own
// multi-token-prediction head (Qwen3.5/3.6's nextn block) into spec, with
// as many KV blocks of its one layer as the target's pool (mo, after
// defaults), so that whatever fits the target fits its head.
func (m *Model) loadMTP(mo models.Options, spec *engine.SpecConfig) error {
	if spec.Method != "mtp" {
		return nil
	}
	q, ok := m.Net.(*models.Qwen35)
	if !ok || !q.HasMTP() {
		return fmt.Errorf("loader: --speculate mtp: %s has no multi-token-prediction (nextn) head (a Qwen3.5/3.6 GGUF with nextn_predict_layers)", m.ID)
	}
	h, err := q.NewMTP(m.src, mo.KVBlocks)
	if err != nil {
		return fmt.Errorf("loader: --speculate mtp: %w", err)
	}
	spec.MTP = h
	return nil
}
