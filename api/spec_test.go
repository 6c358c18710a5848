package api_test

import (
	"testing"

	"github.com/tsgate/tsgate/api"
)

func TestSpecLoads(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.0.3" || doc.Paths.Len() == 0 {
		t.Fatalf("openapi %q with %d paths", doc.OpenAPI, doc.Paths.Len())
	}
}
