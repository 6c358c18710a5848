package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/tsgate/tsgate/sizing"
	"github.com/tsgate/tsgate/tiers"
)

// size prints the layout the sizing rule gives for one series' write rate.
func (m Main) size(_ context.Context, args []string) error {
	c := defaultServeConfig()
	rule := sizing.DefaultRule()
	var rate, rowBytes, target string = "", "30", "50MB"
	extrasBytes := "256"
	sealedPointBytes := sizing.SealedPointBytes
	sealedRowBytes := float64(sizing.SealedRowBytes)
	err := m.parseFlags("size", args, func(fs *flag.FlagSet) {
		c.registerStoreFlags(fs) // --tiers: the pyramid to size
		fs.StringVar(&rate, "rate", rate, "points per second of one series (10/s, 600/m, 2/h)")
		fs.StringVar(&rowBytes, "row-bytes", rowBytes, "stored bytes of one raw row")
		fs.StringVar(&target, "target", target, "partition size to aim at (the design aims at 10-100MB)")
		fs.StringVar(&extrasBytes, "extras-bytes", extrasBytes,
			fmt.Sprintf("mean stored bytes of a rollup row's quantile sketch and counter summary (docs/benchmarks.md: 19-72 B for 10 s gauges, 28-250 B for heavy-tailed latencies, minute to day rows; at most %d)", tiers.MaxExtrasLen))
		fs.Float64Var(&sealedPointBytes, "sealed-point-bytes", sealedPointBytes,
			"stored bytes of one sealed raw point (docs/benchmarks.md: 1.5-1.6 for decimal gauges, up to about 10 for values with a full float64 mantissa)")
		fs.Float64Var(&sealedRowBytes, "sealed-row-bytes", sealedRowBytes,
			"stored bytes of one sealed row of the finest rollup tier, extras included (docs/benchmarks.md: about 18 for decimal gauges' minute rows)")
		fs.Int64Var(&rule.MaxRows, "max-rows", rule.MaxRows, "rows one partition may hold whatever their size (Cassandra guidance: about 100,000)")
		fs.IntVar(&rule.MaxEventBuckets, "max-event-buckets", rule.MaxEventBuckets, "partitions one raw bucket may be split into")
	})
	if err != nil {
		return err
	}
	if rate == "" {
		return fmt.Errorf("--rate is required (points per second of one series, like 10/s)")
	}
	if rule.Rate, err = sizing.ParseRate(rate); err != nil {
		return fmt.Errorf("--rate: %w", err)
	}
	if rule.RowBytes, err = sizing.ParseBytes(rowBytes); err != nil {
		return fmt.Errorf("--row-bytes: %w", err)
	}
	if rule.Target, err = sizing.ParseBytes(target); err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	if strings.TrimSpace(extrasBytes) != "0" {
		if rule.ExtrasBytes, err = sizing.ParseBytes(extrasBytes); err != nil {
			return fmt.Errorf("--extras-bytes: %w", err)
		}
		if rule.ExtrasBytes > tiers.MaxExtrasLen {
			return fmt.Errorf("--extras-bytes: a rollup row's extras take at most %d B", tiers.MaxExtrasLen)
		}
	}
	if !(sealedPointBytes > 0 && sealedPointBytes <= 16) {
		return fmt.Errorf("--sealed-point-bytes: %v is not a size of a sealed point (more than 0, at most 16)", sealedPointBytes)
	}
	if !(sealedRowBytes > 0 && sealedRowBytes <= float64(sizing.RollupExtraBytes+rule.RowBytes+tiers.MaxExtrasLen)) {
		return fmt.Errorf("--sealed-row-bytes: %v is not a size of a sealed rollup row (more than 0, at most a row's)", sealedRowBytes)
	}
	if err := c.Finish(); err != nil {
		return err
	}
	var ts []sizing.Tier
	for _, t := range c.Pyramid {
		ts = append(ts, sizing.Tier{Name: t.Name, Step: t.Step})
	}
	plan, err := sizing.Plan(rule, ts)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "partition bytes = rate × bucket duration × row bytes; aim %s, at most %d rows per partition\n",
		sizing.FormatBytes(float64(rule.Target)), rule.MaxRows)
	fmt.Fprintf(m.Stdout, "a rollup row: %d B + %d B of min, max, sum + %d B of quantile sketch and counter (at most %d B: the last column)\n\n",
		rule.RowBytes, sizing.RollupExtraBytes, rule.ExtrasBytes, tiers.MaxExtrasLen)
	tw := tabwriter.NewWriter(m.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "tier\tbucket\tevent buckets\trows/partition\tpartition size\tat most")
	var flags []string
	for i, s := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s\t%s\n", s.Tier, tiers.FormatDuration(s.BucketWidth), s.EventBuckets, s.Rows, sizing.FormatBytes(s.Bytes), sizing.FormatBytes(s.MaxBytes))
		if _, ok := tiers.DefaultPyramid().ByName(s.Tier); !ok {
			continue // a tier without flags of its own: --tiers sets it
		}
		flags = append(flags, fmt.Sprintf("--%s-bucket %s", s.Tier, tiers.FormatDuration(s.BucketWidth)))
		if ts[i].Step == 0 {
			flags = append(flags, fmt.Sprintf("--%s-event-buckets %d", s.Tier, s.EventBuckets))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(plan) > 0 && ts[0].Step == 0 {
		sz := sizing.SealedBucket(rule.Rate, plan[0].BucketWidth, sealedPointBytes)
		fmt.Fprintf(m.Stdout, "\na sealed raw bucket (points_raw_chunks, once final): %.0f points in %.0f chunks, %s at %.2g B a point\n",
			sz.Points, sz.Chunks, sizing.FormatBytes(sz.Bytes), sealedPointBytes)
	}
	// The finest rollup tier holds most rows; coarser rows keep larger
	// sketches, which --sealed-row-bytes does not describe.
	for i, s := range plan {
		if ts[i].Step == 0 {
			continue
		}
		sz := sizing.SealedPartition(s.Rows, sealedRowBytes)
		fmt.Fprintf(m.Stdout, "a sealed %s partition (%s_chunks, once complete): %.0f rows in %.0f chunks, %s at %.3g B a row\n",
			s.Tier, c.Pyramid[i].Table, sz.Points, sz.Chunks, sizing.FormatBytes(sz.Bytes), sealedRowBytes)
		break
	}
	fmt.Fprintf(m.Stdout, "\nas flags for a new store: %s\n", strings.Join(flags, " "))
	fmt.Fprintln(m.Stdout, "for one series of an existing store: PUT /v1/admin/series/{id}/layout with the raw tier's values")
	return nil
}
