package promapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/api"
)

// TestRoutesMatchSpec checks that the endpoints served are the
// /prometheus paths of api/openapi.yaml, each with GET and POST.
func TestRoutesMatchSpec(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	var specified []string
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/prometheus/") {
			continue
		}
		if item.Get == nil || item.Post == nil || len(item.Operations()) != 2 {
			t.Errorf("%s: want exactly GET and POST in the document", path)
		}
		specified = append(specified, strings.TrimPrefix(path, "/prometheus"))
	}
	var routed []string
	for _, rt := range New(Deps{}, DefaultConfig()).routes() {
		routed = append(routed, rt.path)
	}
	slices.Sort(specified)
	slices.Sort(routed)
	if !slices.Equal(specified, routed) {
		t.Errorf("routes %v, document %v", routed, specified)
	}
}
