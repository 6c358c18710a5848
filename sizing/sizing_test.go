package sizing

import (
	"math/rand/v2"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

var pyramid = []Tier{{"raw", 0}, {"minute", tiers.Minute}, {"hour", tiers.Hour}, {"day", tiers.Day}}

func rule(rate float64, rowBytes, target int64) Rule {
	r := DefaultRule()
	r.Rate, r.RowBytes, r.Target = rate, rowBytes, target
	return r
}

// The expectations are worked out by hand from the rule in the package
// comment.
func TestPlanByHand(t *testing.T) {
	type want struct {
		width int64
		eb    int
		rows  float64
		bytes float64
	}
	for _, tt := range []struct {
		name string
		rule Rule
		want []want
	}{
		{
			// 100,000 rows bind (50 MB / 30 B would be 1.67 M rows): raw
			// 3h = 108,000 rows is too many, 2h = 72,000 fits. Rollup rows
			// are 54 bytes; the minute tier's 90d would be 129,600 rows,
			// 30d is 43,200.
			"10/s 30B 50MB", rule(10, 30, 50_000_000),
			[]want{
				{2 * tiers.Hour, 1, 72_000, 2_160_000},
				{30 * tiers.Day, 1, 43_200, 2_332_800},
				{365 * tiers.Day, 1, 8_760, 473_040},
				{365 * tiers.Day, 1, 365, 19_710},
			},
		},
		{
			// 1h holds 3.6 M rows: the floor width, split into
			// ceil(3.6M / 100k) = 36 event buckets.
			"1000/s 30B 50MB", rule(1000, 30, 50_000_000),
			[]want{{tiers.Hour, 36, 100_000, 3_000_000}, {30 * tiers.Day, 1, 43_200, 2_332_800}, {365 * tiers.Day, 1, 8_760, 473_040}, {365 * tiers.Day, 1, 365, 19_710}},
		},
		{
			// 1h would need 3,600 event buckets; with 64, a bucket may
			// last at most 64 s: 1m gives 100000*60/64 = 93,750 rows.
			"100000/s 30B 50MB", rule(100_000, 30, 50_000_000),
			[]want{{tiers.Minute, 64, 93_750, 2_812_500}, {30 * tiers.Day, 1, 43_200, 2_332_800}, {365 * tiers.Day, 1, 8_760, 473_040}, {365 * tiers.Day, 1, 365, 19_710}},
		},
		{
			// 1 KB rows: 50 MB binds at 50,000 rows; 1h = 36,000 fits, 2h
			// = 72,000 does not. Rollup rows of 1,024 B: 48,828 rows.
			"10/s 1000B 50MB", rule(10, 1000, 50_000_000),
			[]want{{tiers.Hour, 1, 36_000, 36_000_000}, {30 * tiers.Day, 1, 43_200, 44_236_800}, {365 * tiers.Day, 1, 8_760, 8_970_240}, {365 * tiers.Day, 1, 365, 373_760}},
		},
		{
			// One point every 1000 s: 365d is 31,536 rows. The minute
			// tier then stores a row per point, not one per minute.
			"0.001/s 30B 50MB", rule(0.001, 30, 50_000_000),
			[]want{{365 * tiers.Day, 1, 31_536, 946_080}, {365 * tiers.Day, 1, 31_536, 1_702_944}, {365 * tiers.Day, 1, 8_760, 473_040}, {365 * tiers.Day, 1, 365, 19_710}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.rule, pyramid)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Tier != pyramid[i].Name || g.BucketWidth != w.width || g.EventBuckets != w.eb || !near(g.Rows, w.rows) || !near(g.Bytes, w.bytes) {
					t.Errorf("%s: got %s × %d, %.1f rows, %.0f bytes; want %s × %d, %.0f rows, %.0f bytes",
						pyramid[i].Name, tiers.FormatDuration(g.BucketWidth), g.EventBuckets, g.Rows, g.Bytes,
						tiers.FormatDuration(w.width), w.eb, w.rows, w.bytes)
				}
			}
		})
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-6*max(1, b) && d > -1e-6*max(1, b) }

// Whatever the input, a raw partition stays within the bounds unless even
// the narrowest width at the most event buckets cannot, and the chosen
// width is the widest that fits: one step wider would not.
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ru := rule(r.ExpFloat64()*1000, 1+r.Int64N(2000), 1000+r.Int64N(200_000_000))
		if ru.Target < ru.RowBytes {
			continue
		}
		got, err := Plan(ru, pyramid)
		if err != nil {
			t.Fatal(err)
		}
		raw := got[0]
		limit := min(float64(ru.Target/ru.RowBytes), float64(ru.MaxRows))
		if raw.Rows > limit && !(raw.BucketWidth == Widths[0] && raw.EventBuckets == ru.MaxEventBuckets) {
			t.Fatalf("%+v: raw partition of %.0f rows exceeds %.0f", ru, raw.Rows, limit)
		}
		if raw.EventBuckets < 1 || raw.EventBuckets > ru.MaxEventBuckets {
			t.Fatalf("%+v: %d event buckets", ru, raw.EventBuckets)
		}
		if raw.EventBuckets == 1 {
			for _, w := range Widths {
				if w > raw.BucketWidth && ru.Rate*float64(w)/1000 <= limit {
					t.Fatalf("%+v: chose %s though %s fits", ru, tiers.FormatDuration(raw.BucketWidth), tiers.FormatDuration(w))
				}
			}
		} else if raw.BucketWidth == ru.RawFloor && ru.Rate*float64(raw.BucketWidth)/1000/float64(raw.EventBuckets-1) <= limit {
			t.Fatalf("%+v: %d event buckets where %d suffice", ru, raw.EventBuckets, raw.EventBuckets-1)
		}
		for i, s := range got[1:] {
			step := pyramid[i+1].Step
			if s.BucketWidth%step != 0 || s.EventBuckets != 1 {
				t.Fatalf("%+v: %s tier gets %s × %d", ru, s.Tier, tiers.FormatDuration(s.BucketWidth), s.EventBuckets)
			}
		}
	}
}

func TestRuleValidation(t *testing.T) {
	for _, r := range []Rule{rule(0, 30, 1e6), rule(10, 0, 1e6), rule(10, 30, 10)} {
		if _, err := Plan(r, pyramid); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]float64{"10/s": 10, "600/m": 10, "36000/h": 10, "2.5": 2.5, " 86400/d ": 1} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0/s", "-1/s", "10/y", "x/s", "Inf"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
	for in, want := range map[string]int64{"50MB": 50_000_000, "50 mb": 50_000_000, "1.5GB": 1_500_000_000, "64MiB": 64 << 20, "30": 30, "2KiB": 2048, "100B": 100} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "0MB", "-5MB", "5XB", "1e30GB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
	if got := FormatBytes(2_160_000); got != "2.2 MB" {
		t.Errorf("FormatBytes = %q", got)
	}
}

// Rollup rows count their extras at the rule's mean size, and the
// partition's largest size counts them at their bound; raw rows have none.
func TestPlanCountsTheExtras(t *testing.T) {
	r := rule(10, 30, 50_000_000)
	r.ExtrasBytes = 100
	got, err := Plan(r, pyramid)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		row, most := float64(30), float64(30)
		if s.Tier != "raw" {
			row, most = 30+RollupExtraBytes+100, 30+RollupExtraBytes+tiers.MaxExtrasLen
		}
		if s.Bytes != s.Rows*row || s.MaxBytes != s.Rows*most {
			t.Errorf("%s: %.0f rows of %.0f B, %.0f at most, want %.0f B and %.0f B a row", s.Tier, s.Rows, s.Bytes, s.MaxBytes, row, most)
		}
	}
	r.ExtrasBytes = tiers.MaxExtrasLen + 1
	if _, err := Plan(r, pyramid); err == nil {
		t.Error("extras beyond their bound accepted")
	}
}
