package query_test

import (
	"testing"

	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers/embedded"
)

func TestEngineOnEmbeddedStore(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	querytest.Run(t, store)
}
