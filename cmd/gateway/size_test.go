package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

func TestSizePrintsTheRuleForEachTier(t *testing.T) {
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Run(context.Background(), []string{"size", "--rate", "10/s", "--row-bytes", "30", "--target", "50MB"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	// 10/s × 2h × 30 B: 72,000 rows, 2.16 MB (see sizing's hand-computed cases).
	for _, want := range []string{`raw\s+2h\s+1\s+72000\s+2\.2 MB`, `minute\s+30d\s+1\s+43200\s+2\.3 MB`, `hour\s+365d\s+1\s+8760`, `day\s+365d\s+1\s+365`, `--raw-bucket 2h --raw-event-buckets 1`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	for _, bad := range [][]string{{"size"}, {"size", "--rate", "fast"}, {"size", "--rate", "10/s", "--target", "huge"}} {
		out := &lockedBuffer{}
		m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
		if code := m.Run(context.Background(), bad); code == 0 || !strings.Contains(out.String(), "--") {
			t.Errorf("%v: exit %d, output %q", bad, code, out.String())
		}
	}
}
