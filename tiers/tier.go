package tiers

import (
	"errors"
	"fmt"
)

// Table names a storage table. The names are the CQL table names; the
// embedded store maps each to a key prefix.
type Table string

// The tables of the storage model. Raw points go to TableRaw when they arrive
// on time and to TableLate when they arrive later than the lateness threshold,
// so that TableRaw stays time-ordered for time-window compaction.
const (
	TableRaw    Table = "points_raw"
	TableLate   Table = "points_late"
	TableMinute Table = "rollup_1m"
	TableHour   Table = "rollup_1h"
	TableDay    Table = "rollup_1d"
)

// Level is a tier's place in the aggregation pyramid, finest first.
type Level int

// The levels of the pyramid.
const (
	LevelRaw Level = iota
	LevelMinute
	LevelHour
	LevelDay
	numLevels
)

var levelNames = [numLevels]string{"raw", "minute", "hour", "day"}

func (l Level) String() string {
	if l < 0 || l >= numLevels {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return levelNames[l]
}

// ParseLevel maps a tier name (raw, minute, hour, day) to its level.
func ParseLevel(name string) (Level, bool) {
	for i, n := range levelNames {
		if n == name {
			return Level(i), true
		}
	}
	return 0, false
}

// Tier describes one table of the pyramid: what a row holds, how the table is
// partitioned by default, and how long rows live.
type Tier struct {
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
}

// Name is the tier's name as the API spells it.
func (t Tier) Name() string { return t.Level.String() }

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

// Pyramid is the ordered set of tiers, raw first. Index i holds Level(i).
type Pyramid [numLevels]Tier

// DefaultPyramid returns the tiers of the design: partitions of 10-100 MB at
// the rates the sizing rule assumes, and retentions of a week, a month, a
// year and forever.
func DefaultPyramid() Pyramid {
	return Pyramid{
		{Level: LevelRaw, Table: TableRaw, Step: 0, BucketWidth: Hour, EventBuckets: 4, Retention: 7 * Day},
		{Level: LevelMinute, Table: TableMinute, Step: Minute, BucketWidth: Day, EventBuckets: 1, Retention: 30 * Day},
		{Level: LevelHour, Table: TableHour, Step: Hour, BucketWidth: 30 * Day, EventBuckets: 1, Retention: 365 * Day},
		{Level: LevelDay, Table: TableDay, Step: Day, BucketWidth: 365 * Day, EventBuckets: 1, Retention: 0},
	}
}

// Levels returns the pyramid's levels, finest first.
func (p *Pyramid) Levels() []Level { return []Level{LevelRaw, LevelMinute, LevelHour, LevelDay} }

// Tier returns the tier at level l.
func (p *Pyramid) Tier(l Level) *Tier { return &p[l] }

// MaxEventBuckets bounds the partitions one bucket may be split into: beyond
// it, a read of one bucket fans out to more partitions than a request may
// keep in flight.
const MaxEventBuckets = 64

// Validate checks the pyramid the configuration produced.
func (p *Pyramid) Validate() error {
	var errs []error
	for i := range p {
		t := &p[i]
		name := t.Name()
		if t.Level != Level(i) {
			errs = append(errs, fmt.Errorf("tier %s is at position %d", name, i))
		}
		if t.BucketWidth < Second {
			errs = append(errs, fmt.Errorf("%s bucket width must be at least 1s", name))
		}
		if t.Step > 0 && t.BucketWidth%t.Step != 0 {
			errs = append(errs, fmt.Errorf("%s bucket width must be a whole number of %s windows", name, name))
		}
		if t.EventBuckets < 1 || t.EventBuckets > MaxEventBuckets {
			errs = append(errs, fmt.Errorf("%s event buckets must be between 1 and %d", name, MaxEventBuckets))
		}
		if t.Level != LevelRaw && t.EventBuckets != 1 {
			errs = append(errs, fmt.Errorf("%s tier rows are not split into event buckets", name))
		}
		if t.Retention < 0 {
			errs = append(errs, fmt.Errorf("%s retention must not be negative", name))
		}
		if i > 0 && t.Retention != 0 && t.Retention < p[i-1].Retention {
			errs = append(errs, fmt.Errorf("%s retention must be at least the %s retention (coarser tiers keep longer)", name, p[i-1].Name()))
		}
		if i > 0 && p[i-1].Retention == 0 && t.Retention != 0 {
			errs = append(errs, fmt.Errorf("%s retention must be unlimited when the %s tier is", name, p[i-1].Name()))
		}
	}
	if p[LevelRaw].Retention == 0 {
		errs = append(errs, errors.New("raw retention must be set: raw points are the most voluminous tier"))
	}
	return errors.Join(errs...)
}

// DirtySlot is the width of a rollup-log slot: ingest files the windows it
// changed under the slot of its write time, and the rollup worker consumes
// the log slot by slot. Writers and the worker must agree on it, so it is
// fixed.
const DirtySlot = Minute
