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
	// 10/s × 2h × 30 B: 72,000 rows, 2.16 MB (see sizing's hand-computed
	// cases). A minute row: 30 + 24 B and 256 B of extras by default,
	// 2,048 at most: 43,200 × 310 B = 13.4 MB, × 2,102 B = 90.8 MB; an
	// hour row: 8,760 × 310 B = 2.7 MB.
	for _, want := range []string{`raw\s+2h\s+1\s+72000\s+2\.2 MB\s+2\.2 MB`, `minute\s+30d\s+1\s+43200\s+13\.4 MB\s+90\.8 MB`, `hour\s+365d\s+1\s+8760\s+2\.7 MB\s+18\.4 MB`, `day\s+365d\s+1\s+365`, `--raw-bucket 2h --raw-event-buckets 1`, `256 B of quantile sketch`,
		// Sealed: 72,000 points in ⌈72,000 / 1,024⌉ = 71 chunks,
		// 72,000 × 1.6 + 71 × 80 = 120,880 B.
		`sealed raw bucket .*: 72000 points in 71 chunks, 120\.9 KB at 1\.6 B a point`,
		// 43,200 minute rows in 43 chunks: 43,200 × 18 + 43 × 80 =
		// 781,040 B.
		`sealed minute partition \(rollup_1m_chunks, once complete\): 43200 rows in 43 chunks, 781\.0 KB at 18 B a row`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "sealed hour partition") {
		t.Errorf("the hour tier's sealed rows sized as minute rows:\n%s", out.String())
	}
	// Without the extras, rollup rows are 54 B: 43,200 of them 2.3 MB.
	out = &lockedBuffer{}
	m = Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Run(context.Background(), []string{"size", "--rate", "10/s", "--extras-bytes", "0"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if want := `minute\s+30d\s+1\s+43200\s+2\.3 MB\s+90\.8 MB`; !regexp.MustCompile(want).MatchString(out.String()) {
		t.Errorf("output lacks %s:\n%s", want, out.String())
	}
	for _, bad := range [][]string{{"size"}, {"size", "--rate", "fast"}, {"size", "--rate", "10/s", "--target", "huge"}, {"size", "--rate", "10/s", "--extras-bytes", "3KiB"}, {"size", "--rate", "10/s", "--sealed-point-bytes", "0"}, {"size", "--rate", "10/s", "--sealed-row-bytes", "-1"}} {
		out := &lockedBuffer{}
		m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
		if code := m.Run(context.Background(), bad); code == 0 || !strings.Contains(out.String(), "--") {
			t.Errorf("%v: exit %d, output %q", bad, code, out.String())
		}
	}
}
