package stream

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/engine"
)

// Continue submits the rest of a generation a disconnect cut short: req as
// first submitted (its seed fixed by Prepare) with produced, the tokens the
// stream already consumed, as its Resume, so they are prefilled rather than
// sampled again and the sampler goes on exactly as the interrupted one
// would have; a constraint is recompiled past them (the old one may have
// run ahead of what the client got). It runs under b's abort policy, and
// returns nil, nil when nothing is left to generate: produced already
// reaches max_tokens.
func Continue(ctx context.Context, b *Backend, g *GenRequest, req engine.Request, produced []int32) (*Generation, error) {
	if req.MaxTokens > 0 && len(produced) >= req.MaxTokens {
		return nil, nil
	}
	req.Resume = slices.Clone(produced)
	if req.Constraint != nil {
		var err error
		if req.Constraint, err = ConstraintAfter(b, g, req.Resume); err != nil {
			return nil, err
		}
	}
	return b.Submit(ctx, req)
}
