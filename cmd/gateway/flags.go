package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// msFlag is a duration flag in the API's syntax (250ms, 5m, 7d, 1w), held in
// milliseconds.
type msFlag struct{ p *int64 }

func (f msFlag) String() string {
	if f.p == nil {
		return ""
	}
	return tiers.FormatDuration(*f.p)
}

func (f msFlag) Set(s string) error {
	d, err := params.Duration(s)
	if err != nil {
		return err
	}
	*f.p = d
	return nil
}

// durFlag is a time.Duration flag in the same syntax.
type durFlag struct{ p *time.Duration }

func (f durFlag) String() string {
	if f.p == nil {
		return ""
	}
	return tiers.FormatDuration(f.p.Milliseconds())
}

func (f durFlag) Set(s string) error {
	d, err := params.Duration(s)
	if err != nil {
		return err
	}
	*f.p = time.Duration(d) * time.Millisecond
	return nil
}

func msVar(fs *flag.FlagSet, p *int64, name, usage string) { fs.Var(msFlag{p}, name, usage) }
func durVar(fs *flag.FlagSet, p *time.Duration, name, usage string) {
	fs.Var(durFlag{p}, name, usage)
}

// registerPyramid adds the tier flags: --raw-bucket, --raw-event-buckets,
// --raw-retention, --minute-bucket, ...
func registerPyramid(fs *flag.FlagSet, p *tiers.Pyramid) {
	for _, l := range p.Levels() {
		t := p.Tier(l)
		name := l.String()
		msVar(fs, &t.BucketWidth, name+"-bucket", fmt.Sprintf("time span of one %s partition", name))
		msVar(fs, &t.Retention, name+"-retention", fmt.Sprintf("how long %s rows are kept (0: forever)", name))
		if l == tiers.LevelRaw {
			fs.IntVar(&t.EventBuckets, name+"-event-buckets", t.EventBuckets, "partitions per raw bucket (write spreading for busy series)")
		}
	}
}
