// Package tiers owns the gateway's storage model: the tiers of the
// aggregation pyramid as data, the partition layout of a series, bucket
// enumeration as plain arithmetic, and the narrow storage interfaces that the
// Cassandra and embedded stores implement.
//
// Times are int64 Unix milliseconds (UTC) everywhere in this package, and
// every interval is half-open: a Span{From, To} holds t when From <= t < To.
// A bucket [Start, End) holds the points of one series whose t lies in it;
// a partition is one (series, bucket, event bucket) of one table.
//
// The package imports only the standard library, so that every layer above
// the stores can depend on it.
package tiers
