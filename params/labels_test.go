package params

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// The id of a series created from its labels, written out by hand from the
// rule: <name>.<first 16 hex digits of sha256 of name{a="1",b="2"}>.
func TestLabelsID(t *testing.T) {
	l := tiers.Labels{"__name__": "http_requests_total", "job": "api", "code": "200", "path": `/a"b` + "\n"}
	text := `http_requests_total{code="200",job="api",path="/a\"b\n"}`
	if got := CanonicalLabels(l); got != text {
		t.Fatalf("canonical text %s, want %s", got, text)
	}
	sum := sha256.Sum256([]byte(text))
	want := "http_requests_total." + hex.EncodeToString(sum[:])[:16]
	if got := LabelsID(l); got != want {
		t.Fatalf("id %s, want %s", got, want)
	}
	// Fixed (printf %s 'up{instance="localhost:9090",job="prometheus"}' |
	// sha256sum), so that a change of the rule cannot pass unnoticed:
	// every gateway and client must keep deriving this id.
	if got := LabelsID(tiers.Labels{"__name__": "up", "instance": "localhost:9090", "job": "prometheus"}); got != "up.512accc6602ad710" {
		t.Fatalf("LabelsID of up{instance=\"localhost:9090\",job=\"prometheus\"} = %s", got)
	}
	// Empty values are absent; the id ignores them.
	if LabelsID(tiers.Labels{"__name__": "up", "job": "x", "env": ""}) != LabelsID(tiers.Labels{"__name__": "up", "job": "x"}) {
		t.Fatal("an empty value changed the id")
	}
	if err := SeriesID(LabelsID(l)); err != nil {
		t.Fatalf("the id is not a series id: %v", err)
	}
}

func TestLabelRules(t *testing.T) {
	for _, c := range []struct {
		l  tiers.Labels
		ok bool
	}{
		{tiers.Labels{"__name__": "cpu", "host": "a", "_x9": "ü"}, true},
		{tiers.Labels{"host": ""}, true},
		{tiers.Labels{"9x": "a"}, false},
		{tiers.Labels{"a-b": "a"}, false},
		{tiers.Labels{"__meta": "a"}, false},
		{tiers.Labels{"series": "a"}, false},
		{tiers.Labels{strings.Repeat("a", 129): "a"}, false},
		{tiers.Labels{strings.Repeat("a", 128): "a"}, true},
		{tiers.Labels{"a": strings.Repeat("v", 1025)}, false},
		{tiers.Labels{"a": strings.Repeat("v", 1024)}, true},
		{tiers.Labels{"a": "\xff"}, false},
	} {
		if err := Labels(c.l, 32); (err == nil) != c.ok {
			t.Errorf("Labels(%v) = %v, want ok %v", c.l, err, c.ok)
		}
	}
	many := tiers.Labels{}
	for i := range 33 {
		many["l"+strings.Repeat("x", i)] = "v"
	}
	if err := Labels(many, 32); err == nil || !strings.Contains(err.Error(), "--max-labels") {
		t.Fatalf("33 labels: %v", err)
	}
}
