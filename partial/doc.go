// Package partial owns the latency budget of a read and everything that
// makes a cut-short answer honest: the concurrent fan-out of partition reads
// under the budget, and the watermark that says how much of the range has
// been delivered completely, where a cursor (package cursor) resumes.
//
// A read is a sequence of groups. A group is the set of partitions that hold
// one part of the range (the event buckets of one time bucket, plus its late
// partition); groups are disjoint in time and come in read order. Fetch reads
// the partitions of upcoming groups concurrently, merges each group into time
// order, and concatenates the groups. It never lets a slow or failed
// partition cancel its siblings: it stops at the first group it cannot
// complete, and its watermark then says exactly which prefix of the range
// was delivered.
package partial
