package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// SetEmbedding records the embedding of the call claimed under (tenant,
// key) by the claim numbered seq with canonical hash hash: the funnel
// embeds a call's text after it claimed the key, off the request path, and
// keeps the vectors with the record so that later checks (on any replica,
// after a restart) compare against them without embedding again.
//
// It changes nothing but Embedding and EmbeddingModel: not the status, the
// lease, the retention or the Seq. A record that is gone, or that is not
// that claim any more (claimed again after a transient failure, with
// another Seq or hash), is left alone and the error matches ErrNotFound. A
// record that already holds an embedding of model is left as it is.
func (l *Ledger) SetEmbedding(ctx context.Context, tenant, key string, seq, hash uint64, model string, emb []float32) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("set embedding: %w", err)
	}
	if err := checkKey(key); err != nil {
		return fmt.Errorf("set embedding: %w", err)
	}
	switch {
	case model == "":
		return fmt.Errorf("set embedding %q: %w", key, invalid("embedding_model", "empty"))
	case len(model) > MaxKeyBytes:
		return fmt.Errorf("set embedding %q: %w", key, tooLarge("embedding_model", len(model), MaxKeyBytes))
	case len(emb) == 0:
		return fmt.Errorf("set embedding %q: %w", key, invalid("embedding", "empty"))
	}
	for _, v := range emb {
		if v-v != 0 { // NaN or ±Inf
			return fmt.Errorf("set embedding %q: %w", key, invalid("embedding", "holds NaN or Inf"))
		}
	}
	errSame := errors.New("already set") // nothing to write
	err := l.store.Update(ctx, tenant, key, func(cur *Record) (*Record, error) {
		if cur == nil || l.expired(cur, l.now().UnixMilli()) || cur.Seq != seq || cur.Hash != hash {
			return nil, ErrNotFound
		}
		if cur.EmbeddingModel == model && len(cur.Embedding) > 0 {
			return nil, errSame
		}
		next := *cur // the store hands fn a copy of its own
		next.Embedding, next.EmbeddingModel = slices.Clone(emb), model
		return &next, nil
	})
	if errors.Is(err, errSame) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set embedding %q: %w", key, err)
	}
	return nil
}
