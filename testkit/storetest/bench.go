package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/tsgate/tsgate/tiers"
)

// The label index benchmarks of both stores load the same series.

// BenchHosts is how many values the host label of BenchSeries takes: of a
// million series, each host is held by 100.
const BenchHosts = 10_000

// BenchSeries is the i-th series of the label index benchmarks: an id as
// remote write derives it (the metric name, a dot, 16 hex digits) and 5
// labels — __name__ among 10 metric names, host among BenchHosts, dc among
// 5 (each host in one), job among 20, instance unique.
func BenchSeries(i int) (string, tiers.Labels) {
	metric := fmt.Sprintf("node_metric_%d", i%10)
	host := (i / 10) % BenchHosts
	sum := sha256.Sum256(fmt.Appendf(nil, "%d", i))
	return metric + "." + hex.EncodeToString(sum[:8]), tiers.Labels{
		"__name__": metric,
		"host":     BenchHost(host),
		"dc":       fmt.Sprintf("dc-%d", host%5),
		"job":      fmt.Sprintf("job-%02d", (i/7)%20),
		"instance": fmt.Sprintf("10.%d.%d.%d:9100", i>>16&0xff, i>>8&0xff, i&0xff),
	}
}

// BenchHost is the value of the host label of host number h.
func BenchHost(h int) string { return fmt.Sprintf("host-%05d", h) }
