package httpwatch_test

import (
	"context"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
)

// The internal tests get their chain from here: package chain imports httpwatch, so only this
// external test package can import it.
func init() {
	httpwatch.StartChain = startChain
}

func startChain(cfg httpwatch.TestChainConfig) (*httpwatch.TestChain, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	c, err := chain.New(ctx, chain.Config{
		Resources:         cfg.Resources,
		DisableWatchCache: !cfg.Cached,
		CacheClock:        cfg.CacheClock,
		API:               cfg.API,
		Logger:            testutil.DiscardLogger(),
		WrapServed:        cfg.Wrap,
		Store:             cfg.Store,
	})
	if err != nil {
		return nil, err
	}
	return &httpwatch.TestChain{Store: c.Store(), API: c.API(), URL: c.URL(), Close: c.Close}, nil
}
