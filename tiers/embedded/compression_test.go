package embedded

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

func TestConformanceOnDiskZstd(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Now: storetest.Start, Compression: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	storetest.Run(t, s, tiers.DefaultPyramid())
}

// A store written with snappy and reopened with zstd reads every row back,
// before and after its tables are compacted again, and back under snappy;
// compacted under zstd, the same rollup rows take less room; an unknown
// compression is refused.
func TestCompressionSwitchKeepsRows(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{Compression: "lz5"}); err == nil {
		t.Fatal("an unknown compression was taken")
	}
	dir := t.TempDir()
	var openIn func(dir, compression string) *Store
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ctx := context.Background()
	key := tiers.PartitionKey{Table: tiers.RollupTable(tiers.Minute), Series: "lat", Bucket: tiers.AlignDown(now.UnixMilli(), tiers.Day) - tiers.Day}
	r := rand.New(rand.NewPCG(1, 2))
	var rows []tiers.Row
	for m := range int64(1440) {
		var row tiers.Row
		for k := range int64(6) {
			row.AddExtras(tiers.PointRow(key.Bucket+m*tiers.Minute+k*10*tiers.Second, math.Round(math.Exp(r.NormFloat64()+3)*1000)/1000))
		}
		row.T = key.Bucket + m*tiers.Minute
		row.X = row.X.Compact(row)
		rows = append(rows, row)
	}
	open := func(compression string) *Store {
		return openIn(dir, compression)
	}
	openIn = func(dir, compression string) *Store {
		s, err := Open(dir, Options{Now: clock, SweepInterval: -1, Compression: compression})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	compact := func(s *Store) int64 {
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
			t.Fatal(err)
		}
		return liveBytes(s)
	}
	readAll := func(s *Store, when string) {
		pages := s.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: key.Bucket, To: key.Bucket + tiers.Day}, PageSize: 500, Extras: true})
		defer pages.Close()
		var got []tiers.Row
		for {
			page, err := pages.Next()
			if err == tiers.ErrDone {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page...)
		}
		if len(got) != len(rows) {
			t.Fatalf("%s: %d rows, want %d", when, len(got), len(rows))
		}
		for i := range rows {
			a, b := got[i], rows[i]
			qa, _ := a.Quantile(0.9)
			qb, _ := b.Quantile(0.9)
			if a.T != b.T || a.Min != b.Min || a.Max != b.Max || a.Sum != b.Sum || a.Count != b.Count || qa != qb {
				t.Fatalf("%s: row %d = %+v (p90 %v), want %+v (p90 %v)", when, i, a, qa, b, qb)
			}
		}
	}
	s := open("snappy")
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: 30 * tiers.Day, Rows: slices.Clone(rows)}}); err != nil {
		t.Fatal(err)
	}
	snappy := compact(s)
	readAll(s, "snappy")
	closeStore(t, s)
	s = open("zstd")
	readAll(s, "reopened with zstd")
	compact(s)
	readAll(s, "compacted again with zstd")
	closeStore(t, s)
	s = open("")
	readAll(s, "reopened with snappy")
	closeStore(t, s)
	// The same rows written under zstd from the start.
	s = openIn(t.TempDir(), "zstd")
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: 30 * tiers.Day, Rows: slices.Clone(rows)}}); err != nil {
		t.Fatal(err)
	}
	zstd := compact(s)
	readAll(s, "written with zstd")
	closeStore(t, s)
	if zstd >= snappy {
		t.Errorf("%d bytes compacted with zstd, %d with snappy", zstd, snappy)
	}
}
