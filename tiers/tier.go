package tiers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Table names a storage table. The names are the CQL table names; the
// embedded store maps each to a key prefix.
type Table string

// The tables every pyramid has. Raw points go to TableRaw when they arrive
// on time and to TableLate when they arrive later than the lateness
// threshold, so that TableRaw stays time-ordered for time-window
// compaction. Each rollup tier has a table of its own, named by RollupTable
// after its step.
const (
	TableRaw  Table = "points_raw"
	TableLate Table = "points_late"
)

// RollupTable is the table of the rollup tier whose windows are step wide:
// rollup_1m, rollup_1h, rollup_1d, rollup_10s. The name follows the step,
// not the tier's name, so renaming a tier keeps its data.
func RollupTable(step int64) Table { return Table("rollup_" + FormatDuration(step)) }

// Level is a tier's position in its pyramid, finest (raw) first.
type Level int

// LevelRaw is the raw tier's level in every pyramid.
const LevelRaw Level = 0

// RawName is the raw tier's name: it is also a value of the API's
// resolution parameter, so it is not configurable.
const RawName = "raw"

// Tier describes one table of the pyramid: what a row holds, how the table is
// partitioned by default, how long rows live and which ranges resolution=auto
// serves from it.
type Tier struct {
	// Name is the tier's name as the API spells it.
	Name  string
	Level Level
	Table Table
	// Step is the width of the window one row aggregates; 0 for raw points.
	Step int64
	// BucketWidth is the default time span of one partition.
	BucketWidth int64
	// EventBuckets is the default number of partitions per bucket; a point's
	// event bucket is derived from its timestamp (see EventBucket).
	EventBuckets int
	// Retention is how long a row lives after its timestamp; 0 keeps rows
	// forever.
	Retention int64
	// AutoMax is the longest range resolution=auto answers from this tier;
	// longer ranges go to coarser tiers. The coarsest tier has none (0).
	AutoMax int64
}

// DefaultLayout is the layout of a series that never had its own.
func (t Tier) DefaultLayout() Layout {
	return Layout{{Since: 0, Width: t.BucketWidth, EventBuckets: t.EventBuckets}}
}

// Covers reports whether rows at time t are still kept at time now.
func (t Tier) Covers(at, now int64) bool {
	return t.Retention == 0 || at >= now-t.Retention
}

// OldestAvailable is the oldest timestamp the tier still holds at now, or
// MinTime for a tier that keeps rows forever.
func (t Tier) OldestAvailable(now int64) int64 {
	if t.Retention == 0 {
		return MinTime
	}
	return now - t.Retention
}

// Pyramid is the ordered set of tiers, raw first: index i holds Level(i).
// Each rollup tier's step is a whole multiple of the previous rollup
// tier's, so every tier can be computed from the one below it.
type Pyramid []Tier

// DefaultPyramid returns the tiers of the design: raw, minute, hour and day,
// with partitions of 10-100 MB at the rates the sizing rule assumes,
// retentions of a week, a month, a year and forever, and auto routing up to
// 6 hours, 7 days and 90 days.
func DefaultPyramid() Pyramid {
	return Pyramid{
		{Name: RawName, Level: 0, Table: TableRaw, Step: 0, BucketWidth: Hour, EventBuckets: 4, Retention: 7 * Day, AutoMax: 6 * Hour},
		{Name: "minute", Level: 1, Table: RollupTable(Minute), Step: Minute, BucketWidth: Day, EventBuckets: 1, Retention: 30 * Day, AutoMax: 7 * Day},
		{Name: "hour", Level: 2, Table: RollupTable(Hour), Step: Hour, BucketWidth: 30 * Day, EventBuckets: 1, Retention: 365 * Day, AutoMax: 90 * Day},
		{Name: "day", Level: 3, Table: RollupTable(Day), Step: Day, BucketWidth: 365 * Day, EventBuckets: 1, Retention: 0},
	}
}

// Levels returns the pyramid's levels, finest first.
func (p Pyramid) Levels() []Level {
	out := make([]Level, len(p))
	for i := range p {
		out[i] = Level(i)
	}
	return out
}

// Rollups returns the levels of the rollup tiers, finest first.
func (p Pyramid) Rollups() []Level { return p.Levels()[1:] }

// Tier returns the tier at level l.
func (p Pyramid) Tier(l Level) *Tier { return &p[l] }

// Raw returns the raw tier.
func (p Pyramid) Raw() *Tier { return &p[LevelRaw] }

// Coarsest returns the level of the coarsest tier.
func (p Pyramid) Coarsest() Level { return Level(len(p) - 1) }

// ByName returns the tier with the given name.
func (p Pyramid) ByName(name string) (*Tier, bool) {
	for i := range p {
		if p[i].Name == name {
			return &p[i], true
		}
	}
	return nil, false
}

// ByTable returns the tier whose rows are kept in table.
func (p Pyramid) ByTable(table Table) (*Tier, bool) {
	for i := range p {
		if p[i].Table == table {
			return &p[i], true
		}
	}
	return nil, false
}

// Tables returns every data table of the pyramid, the late table included.
func (p Pyramid) Tables() []Table {
	out := []Table{TableRaw, TableLate}
	for _, l := range p.Rollups() {
		out = append(out, p[l].Table)
	}
	return out
}

// DirtyStep is the width of the windows ingest marks dirty for rollups: the
// finest rollup tier's step, from which every coarser window is
// recomputed. It is 0 for a pyramid without rollup tiers.
func (p Pyramid) DirtyStep() int64 {
	if len(p) < 2 {
		return 0
	}
	return p[1].Step
}

// Clone returns a copy that shares nothing with p.
func (p Pyramid) Clone() Pyramid { return append(Pyramid(nil), p...) }

// MaxEventBuckets bounds the partitions one bucket may be split into: beyond
// it, a read of one bucket fans out to more partitions than a request may
// keep in flight.
const MaxEventBuckets = 64

// MaxTiers bounds the pyramid: every tier is a table, a rollup pass and a
// step of routing.
const MaxTiers = 8

// Validate checks the pyramid the configuration produced: raw first, steps
// that divide each other, buckets that hold whole windows, retentions that
// grow with the step and auto thresholds that grow too.
func (p Pyramid) Validate() error {
	if len(p) == 0 {
		return errors.New("the pyramid has no tiers; it needs at least the raw tier")
	}
	if len(p) > MaxTiers {
		return fmt.Errorf("the pyramid has %d tiers; at most %d are supported", len(p), MaxTiers)
	}
	var errs []error
	names := map[string]bool{}
	for i := range p {
		t := &p[i]
		name := t.Name
		if i == 0 {
			if name != RawName || t.Step != 0 {
				errs = append(errs, fmt.Errorf("the first tier must be %q, the raw points (step 0)", RawName))
			}
		} else {
			if err := checkTierName(name); err != nil {
				errs = append(errs, err)
			}
			prev := p[i-1].Step
			switch {
			case t.Step < Second || t.Step%Second != 0:
				errs = append(errs, fmt.Errorf("%s step must be a whole number of seconds, at least 1s", name))
			case t.Step <= prev:
				errs = append(errs, fmt.Errorf("%s step %s must be longer than the %s step %s (tiers go from fine to coarse)", name, FormatDuration(t.Step), p[i-1].Name, FormatDuration(prev)))
			case prev > 0 && t.Step%prev != 0:
				errs = append(errs, fmt.Errorf("%s step %s must be a whole multiple of the %s step %s, from which it is computed", name, FormatDuration(t.Step), p[i-1].Name, FormatDuration(prev)))
			}
			if t.EventBuckets != 1 {
				errs = append(errs, fmt.Errorf("%s tier rows are not split into event buckets", name))
			}
		}
		if names[name] {
			errs = append(errs, fmt.Errorf("tier name %q is used twice", name))
		}
		names[name] = true
		if t.Level != Level(i) {
			errs = append(errs, fmt.Errorf("tier %s is at position %d but says level %d", name, i, t.Level))
		}
		if want := tableOf(i, t.Step); t.Table != want {
			errs = append(errs, fmt.Errorf("tier %s keeps its rows in %s, not %s", name, want, t.Table))
		}
		if t.BucketWidth < Second {
			errs = append(errs, fmt.Errorf("%s bucket width must be at least 1s", name))
		}
		if t.Step > 0 && t.BucketWidth%t.Step != 0 {
			errs = append(errs, fmt.Errorf("%s bucket width %s must be a whole number of %s windows", name, FormatDuration(t.BucketWidth), FormatDuration(t.Step)))
		}
		if t.EventBuckets < 1 || t.EventBuckets > MaxEventBuckets {
			errs = append(errs, fmt.Errorf("%s event buckets must be between 1 and %d", name, MaxEventBuckets))
		}
		if t.Retention < 0 {
			errs = append(errs, fmt.Errorf("%s retention must not be negative", name))
		}
		if i > 0 && t.Retention != 0 && (p[i-1].Retention == 0 || t.Retention < p[i-1].Retention) {
			errs = append(errs, fmt.Errorf("%s retention must be at least the %s retention (coarser tiers keep longer)", name, p[i-1].Name))
		}
		last := i == len(p)-1
		switch {
		case last && t.AutoMax != 0:
			errs = append(errs, fmt.Errorf("%s is the coarsest tier: resolution=auto sends every longer range to it, so it takes no auto threshold", name))
		case !last && t.AutoMax <= 0:
			errs = append(errs, fmt.Errorf("%s needs an auto threshold: the longest range resolution=auto answers from it", name))
		case !last && i > 0 && t.AutoMax <= p[i-1].AutoMax:
			errs = append(errs, fmt.Errorf("%s auto threshold must be longer than the %s one (auto thresholds grow with the step)", name, p[i-1].Name))
		}
	}
	if p[0].Retention == 0 {
		errs = append(errs, errors.New("raw retention must be set: raw points are the most voluminous tier"))
	}
	return errors.Join(errs...)
}

func tableOf(i int, step int64) Table {
	if i == 0 {
		return TableRaw
	}
	return RollupTable(step)
}

// checkTierName accepts the names a tier may have: short, lower case, safe
// in URLs, logs and metric labels.
func checkTierName(name string) error {
	if name == "" || len(name) > 32 {
		return fmt.Errorf("tier name %q must be 1 to 32 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Errorf("tier name %q may only hold a-z, 0-9 and _", name)
		}
	}
	if name == RawName || name == "auto" {
		return fmt.Errorf("tier name %q is reserved", name)
	}
	return nil
}

// NewRollupTier returns a rollup tier with the table its step implies; the
// caller appends it to a pyramid (see Pyramid.Validate for the rules).
func NewRollupTier(name string, step, bucket, retention, autoMax int64) Tier {
	return Tier{Name: name, Table: RollupTable(step), Step: step, BucketWidth: bucket, EventBuckets: 1, Retention: retention, AutoMax: autoMax}
}

// Renumber sets every tier's Level to its position, after tiers were added
// or removed.
func (p Pyramid) Renumber() {
	for i := range p {
		p[i].Level = Level(i)
		if i == 0 {
			p[i].Table = TableRaw
		} else {
			p[i].Table = RollupTable(p[i].Step)
		}
	}
}

// String writes the pyramid in the syntax of ParsePyramid.
func (p Pyramid) String() string {
	parts := make([]string, len(p))
	for i, t := range p {
		var b strings.Builder
		b.WriteString("name=" + t.Name)
		if i > 0 {
			b.WriteString(",step=" + FormatDuration(t.Step))
		}
		b.WriteString(",bucket=" + FormatDuration(t.BucketWidth))
		if i == 0 {
			b.WriteString(",event-buckets=" + strconv.Itoa(t.EventBuckets))
		}
		b.WriteString(",retention=" + FormatDuration(t.Retention))
		if t.AutoMax > 0 {
			b.WriteString(",auto-max=" + FormatDuration(t.AutoMax))
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, ";")
}

// ParsePyramid reads a pyramid from its configuration syntax: tiers
// separated by ';', finest first, each a comma list of key=value with the
// keys name, step, bucket, event-buckets (raw only), retention and auto-max:
//
//	name=raw,bucket=1h,event-buckets=4,retention=7d,auto-max=6h;
//	name=minute,step=1m,bucket=1d,retention=30d,auto-max=7d;
//	name=hour,step=1h,bucket=30d,retention=365d
//
// Durations are in the API's syntax and parsed by parseDuration. The result
// is validated.
func ParsePyramid(spec string, parseDuration func(string) (int64, error)) (Pyramid, error) {
	var p Pyramid
	for i, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		t := Tier{EventBuckets: 1}
		seen := map[string]bool{}
		for kv := range strings.SplitSeq(part, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || v == "" {
				return nil, fmt.Errorf("tier %d: %q is not key=value", i+1, kv)
			}
			if seen[k] {
				return nil, fmt.Errorf("tier %d: %s is given twice", i+1, k)
			}
			seen[k] = true
			var err error
			switch k {
			case "name":
				t.Name = v
			case "step":
				t.Step, err = parseDuration(v)
			case "bucket":
				t.BucketWidth, err = parseDuration(v)
			case "retention":
				t.Retention, err = parseDuration(v)
			case "auto-max":
				t.AutoMax, err = parseDuration(v)
			case "event-buckets":
				t.EventBuckets, err = strconv.Atoi(v)
			default:
				return nil, fmt.Errorf("tier %d: unknown key %q (name, step, bucket, event-buckets, retention, auto-max)", i+1, k)
			}
			if err != nil {
				return nil, fmt.Errorf("tier %d: %s: %v", i+1, k, err)
			}
		}
		if !seen["name"] {
			return nil, fmt.Errorf("tier %d: name is missing", i+1)
		}
		if !seen["bucket"] {
			return nil, fmt.Errorf("tier %s: bucket is missing", t.Name)
		}
		p = append(p, t)
	}
	p.Renumber()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// DirtySlot is the width of a rollup-log slot: ingest files the windows it
// changed under the slot of its write time, and the rollup worker consumes
// the log slot by slot. Writers and the worker must agree on it, so it is
// fixed.
const DirtySlot = Minute

// Watermarks holds, per level, the time before which the tier holds every
// window: rollups have run for everything that starts earlier. The raw
// tier's entry is ignored (raw points are always current).
type Watermarks []int64

// NoWatermarks is the state where nothing is rolled up: readers then read
// finer tiers, never wrong data.
func NoWatermarks(p Pyramid) Watermarks {
	wm := make(Watermarks, len(p))
	wm[0] = MaxTime
	for i := 1; i < len(wm); i++ {
		wm[i] = MinTime
	}
	return wm
}
