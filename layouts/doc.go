// Package layouts owns the administration of partition layouts: a series'
// raw layout history and changes to it (checked so that no point already
// written moves), the tracking of wide raw partitions on the read and write
// paths, the automatic split of series whose partitions keep growing too
// wide, and the guard that keeps blocked series away from their partitions.
//
// Every count here is per gateway instance: the wide-partition tracker sees
// the rows this process wrote and read, not the cluster's.
package layouts
