package api_test

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/tsgate/tsgate/api"
)

// The reference page explains every operation, schema and problem type of
// the document, and stands alone: no script, no external asset.
func TestDocsPage(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	page, err := api.RenderDocs(doc)
	if err != nil {
		t.Fatal(err)
	}
	var anchors []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("an operation of %v has no operationId", item)
			}
			anchors = append(anchors, "op-"+op.OperationID)
		}
	}
	for name := range doc.Components.Schemas {
		anchors = append(anchors, "schema-"+name)
	}
	types, err := api.ProblemTypes(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) < 10 {
		t.Fatalf("%d problem types", len(types))
	}
	for _, p := range types {
		anchors = append(anchors, "problem/"+p.Slug)
	}
	for _, a := range anchors {
		if !bytes.Contains(page, []byte(`id="`+a+`"`)) {
			t.Errorf("the page has no #%s", a)
		}
	}
	for _, link := range regexp.MustCompile(`href="#([^"]+)"`).FindAllSubmatch(page, -1) {
		if !bytes.Contains(page, []byte(`id="`+string(link[1])+`"`)) {
			t.Errorf("link to #%s, which the page does not have", link[1])
		}
	}
	if loc := regexp.MustCompile(`(?i)<script|<link|<img|<iframe|\bsrc=|href="(https?:)?//|url\(`).FindIndex(page); loc != nil {
		t.Errorf("the page needs something outside it: %q", page[max(0, loc[0]-40):min(len(page), loc[1]+40)])
	}
}
