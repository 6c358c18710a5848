// Package partial owns the latency budget of a read and everything that
// makes a cut-short answer honest: the concurrent fan-out of partition reads
// under the budget, the watermark that says how much of the range has been
// delivered completely, and the signed cursors that resume exactly there.
//
// A read is a sequence of groups. A group is the set of partitions that hold
// one part of the range (the event buckets of one time bucket, plus its late
// partition); groups are disjoint in time and come in read order. Fetch reads
// the partitions of upcoming groups concurrently, merges each group into time
// order, and concatenates the groups. It never lets a slow or failed
// partition cancel its siblings: it stops at the first group it cannot
// complete, and its watermark then says exactly which prefix of the range
// was delivered.
//
// Resuming inside a partition. A cursor resumes at a time position, and the
// next page reads each partition from that position with a clustering-key
// slice (t >= position, or t < position descending). That is what the
// driver's paging state would buy — Cassandra seeks straight to the row, it
// does not scan the partition from its start — and unlike a paging state it
// is exact for a merged stream: the merge stops at a watermark between rows
// of several event-bucket partitions, while each driver page ends wherever
// its fetch ended, past rows the merge has not emitted yet. The cursor thus
// never carries a driver paging state (which holds primary-key data); it
// carries only the request's digest, range, plan and position, signed.
//
// The series listing's cursor lives here too: the last id of a page,
// versioned and checked, so that only a next_cursor the gateway issued
// resumes a listing.
package partial
