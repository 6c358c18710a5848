package gateway

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// pyramidFlags are the flags that configure the pyramid: --tiers declares
// a whole pyramid, and the per-tier flags of the default pyramid's names
// (--raw-bucket, --minute-retention, --auto-hour-max, ...) adjust the tier
// of that name in whichever pyramid is in force.
type pyramidFlags struct {
	fs   *flag.FlagSet
	spec string
	// adjust holds, per tier name, the values the per-tier flags set.
	adjust map[string]*tiers.Tier
}

// defaultTierNames are the tiers that have flags of their own.
var defaultTierNames = []string{"raw", "minute", "hour", "day"}

func registerPyramid(fs *flag.FlagSet) *pyramidFlags {
	f := &pyramidFlags{fs: fs, adjust: map[string]*tiers.Tier{}}
	fs.StringVar(&f.spec, "tiers", "", "the pyramid, finest first: tiers separated by ';', each name=...,step=...,bucket=...,retention=...,auto-max=... "+
		"(raw also event-buckets=...); default: "+tiers.DefaultPyramid().String())
	for _, t := range tiers.DefaultPyramid() {
		v := t
		f.adjust[t.Name] = &v
		name := t.Name
		msVar(fs, &v.BucketWidth, name+"-bucket", fmt.Sprintf("time span of one %s partition", name))
		msVar(fs, &v.Retention, name+"-retention", fmt.Sprintf("how long %s rows are kept (0: forever)", name))
		if t.Level == tiers.LevelRaw {
			fs.IntVar(&v.EventBuckets, name+"-event-buckets", v.EventBuckets, "partitions per raw bucket (write spreading for busy series)")
		}
		if t.AutoMax > 0 {
			msVar(fs, &v.AutoMax, "auto-"+name+"-max", fmt.Sprintf("resolution=auto answers ranges up to this from the %s tier", name))
		}
	}
	return f
}

// build returns the configured pyramid, validated.
func (f *pyramidFlags) build() (tiers.Pyramid, error) {
	p := tiers.DefaultPyramid()
	if strings.TrimSpace(f.spec) != "" {
		var err error
		if p, err = tiers.ParsePyramid(f.spec, params.Duration); err != nil {
			return nil, fmt.Errorf("--tiers: %w", err)
		}
	}
	var errs []string
	f.fs.Visit(func(fl *flag.Flag) {
		for _, name := range defaultTierNames {
			var field string
			switch fl.Name {
			case name + "-bucket", name + "-retention", name + "-event-buckets":
				field = strings.TrimPrefix(fl.Name, name+"-")
			case "auto-" + name + "-max":
				field = "auto-max"
			default:
				continue
			}
			t, ok := p.ByName(name)
			if !ok {
				errs = append(errs, fmt.Sprintf("--%s: the pyramid has no %s tier", fl.Name, name))
				return
			}
			v := f.adjust[name]
			switch field {
			case "bucket":
				t.BucketWidth = v.BucketWidth
			case "retention":
				t.Retention = v.Retention
			case "event-buckets":
				t.EventBuckets = v.EventBuckets
			case "auto-max":
				t.AutoMax = v.AutoMax
			}
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// storedTier is a tier as the store remembers it: what decides where rows
// live. Retentions and auto thresholds may change freely.
type storedTier struct {
	Tier         string `json:"tier"`
	Step         string `json:"step,omitempty"`
	Bucket       string `json:"bucket"`
	EventBuckets int    `json:"event_buckets"`
}

func storedTiers(p tiers.Pyramid) []storedTier {
	out := make([]storedTier, len(p))
	for i, t := range p {
		out[i] = storedTier{Tier: t.Name, Step: tiers.FormatDuration(t.Step), Bucket: tiers.FormatDuration(t.BucketWidth), EventBuckets: t.EventBuckets}
	}
	return out
}

// CheckPyramid refuses a pyramid other than the one the store's data was
// written with — other tiers, steps, bucket widths or event-bucket counts
// would leave existing data unreadable or read it as the wrong tier — and
// records the pyramid in a store that has none yet.
func CheckPyramid(ctx context.Context, store tiers.Store, p tiers.Pyramid) error {
	want := storedTiers(p)
	enc, _ := json.Marshal(want)
	got, err := store.Secret(ctx, "layout", func() ([]byte, error) { return enc, nil })
	if err != nil {
		return fmt.Errorf("read the stored pyramid: %w", err)
	}
	if string(got) == string(enc) {
		return nil
	}
	var stored []storedTier
	if err := json.Unmarshal(got, &stored); err != nil {
		return fmt.Errorf("the store's record of its pyramid is unreadable: %w", err)
	}
	var diffs []string
	for i := range max(len(stored), len(want)) {
		switch {
		case i >= len(stored):
			diffs = append(diffs, fmt.Sprintf("tier %s is configured but the store has no such tier", want[i].Tier))
		case i >= len(want):
			diffs = append(diffs, fmt.Sprintf("the store has a tier %s that is not configured", stored[i].Tier))
		default:
			s, w := stored[i], want[i]
			if s.Step == "" {
				// Written before pyramids were configurable: the default
				// pyramid, whose steps are implied by the names.
				s.Step = w.Step
			}
			switch {
			case s == w:
			case s.Tier == w.Tier && s.Step == w.Step:
				diffs = append(diffs, fmt.Sprintf("%s: stored bucket %s × %d, configured %s × %d",
					w.Tier, s.Bucket, s.EventBuckets, w.Bucket, w.EventBuckets))
			default:
				diffs = append(diffs, fmt.Sprintf("tier %d: stored %s (step %s, bucket %s × %d), configured %s (step %s, bucket %s × %d)",
					i, s.Tier, s.Step, s.Bucket, s.EventBuckets, w.Tier, w.Step, w.Bucket, w.EventBuckets))
			}
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("the configured pyramid differs from the one this store was written with (%s); "+
		"existing data would become unreadable — restore the --tiers and --*-bucket / --raw-event-buckets values it was written with",
		strings.Join(diffs, "; "))
}
