// Package api holds the HTTP contract of the gateway: the OpenAPI document
// api/openapi.yaml, embedded so that the binary serves and enforces the
// document it was built with, and the API reference page rendered from it.
package api

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

// Spec is the OpenAPI document, as written.
//
//go:embed openapi.yaml
var Spec []byte

// Load parses and validates the OpenAPI document. Each call returns a new
// document, which the caller may adjust (to its configured limits, say)
// without affecting others.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(Spec)
	if err != nil {
		return nil, fmt.Errorf("api: parse openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	return doc, nil
}
