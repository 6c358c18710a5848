package params

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tsgate/tsgate/tiers"
)

// DefaultMaxLabels is the default of --max-labels: how many labels one
// series may carry.
const DefaultMaxLabels = 32

// The bounds of a label.
const (
	MaxLabelName  = 128
	MaxLabelValue = 1024
)

// MetricName is the label that holds a series' metric name.
const MetricName = "__name__"

// LabelName checks a label name: [a-zA-Z_][a-zA-Z0-9_]*, at most 128
// characters, not the pseudo-label series, and not reserved (a name that
// starts with __, other than __name__).
func LabelName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a label name must not be empty")
	case len(name) > MaxLabelName:
		return fmt.Errorf("label name %.40q… is longer than %d characters", name, MaxLabelName)
	case name == tiers.SeriesLabel:
		return fmt.Errorf("%q is the pseudo-label of every series' id; it cannot be set", name)
	case strings.HasPrefix(name, "__") && name != MetricName:
		return fmt.Errorf("label name %q is reserved: names starting with __ are, but %s", name, MetricName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return fmt.Errorf("label name %q must match [a-zA-Z_][a-zA-Z0-9_]* (%s at %d)", name, quoteByte(name, i), i)
	}
	return nil
}

// LabelValue checks a label's value: UTF-8, at most 1024 bytes. An empty
// value means the label is absent, as in Prometheus.
func LabelValue(name, value string) error {
	switch {
	case len(value) > MaxLabelValue:
		return fmt.Errorf("the value of label %s is %d bytes, more than %d", name, len(value), MaxLabelValue)
	case !utf8.ValidString(value):
		return fmt.Errorf("the value of label %s is not UTF-8", name)
	}
	return nil
}

// Labels checks a series' labels against the rules of the API: every name
// and value, and at most max labels with a value. It returns the first
// problem, in name order.
func Labels(l tiers.Labels, max int) error {
	n := 0
	for _, name := range l.Names() {
		if err := LabelName(name); err != nil {
			return err
		}
		if err := LabelValue(name, l[name]); err != nil {
			return err
		}
		if l[name] != "" {
			n++
		}
	}
	if max > 0 && n > max {
		return fmt.Errorf("%d labels, more than %d (--max-labels)", n, max)
	}
	return nil
}

// CanonicalLabels is the canonical text of a label set:
// name{a="1",b="2"}, the metric name (the __name__ label, if any) then
// the other labels with a value sorted by name, each value written as a
// Go double-quoted string (strconv.Quote).
func CanonicalLabels(l tiers.Labels) string {
	var b strings.Builder
	b.WriteString(l[MetricName])
	b.WriteByte('{')
	first := true
	for _, name := range l.Names() {
		if name == MetricName || l[name] == "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[name]))
	}
	b.WriteByte('}')
	return b.String()
}

// LabelsID is the series id of a series known by its labels alone (one
// created by Prometheus remote write): <metric name>.<h>, where h is the
// first 16 lowercase hex digits of the SHA-256 of CanonicalLabels. Every
// gateway, and any client, derives the same id from the same labels.
func LabelsID(l tiers.Labels) string {
	sum := sha256.Sum256([]byte(CanonicalLabels(l)))
	return l[MetricName] + "." + hex.EncodeToString(sum[:8])
}
