// Package client is the Go client of the gateway's HTTP API, generated
// from api/openapi.yaml by oapi-codegen (client.gen.go), with a few
// hand-written types where JSON needs more than the generator gives
// (types.go).
package client

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../openapi.yaml
