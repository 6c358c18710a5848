package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// report prints what was measured as Markdown: the panels with the
// ratios of the gateway's medians to each peer's, then loading, disk and
// memory.
func (b *bench) report(w io.Writer) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("\n#### Measured %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	p("Data set: %d series × %d days at %s = %d points (%s to %s), seed %d. %d CPUs, load average at the end %s.\n",
		b.d.series, b.c.days, interval, b.d.total(), b.d.start.Format("2006-01-02"), b.d.end.Format("2006-01-02"), b.c.seed,
		runtime.NumCPU(), loadavg())
	p("Versions: %s; %s; %s.\n\n", version(b.c.gatewayBin, "version"), vmVersion(), version(b.c.prometheusBin, "--version"))
	if len(b.rows) > 0 {
		p("| panel (avg) | read | gateway | gateway PromQL | VictoriaMetrics | Prometheus | gw/VM | gw PromQL/VM | gw/Prom | gw PromQL/Prom |\n")
		p("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range b.rows {
			mode := r.mode
			switch r.mode {
			case "warm":
				mode = fmt.Sprintf("warm, median of %d", r.n)
			case "refreshing":
				mode = fmt.Sprintf("refreshing, median of %d", r.n)
			}
			var cell [nSides]string
			for s := range nSides {
				cell[s] = msText(r.med[s])
				if !b.timed(s, r.panel) {
					cell[s] = "answer differs"
				}
			}
			p("| %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.panel.label(), stepText(r.panel), mode,
				cell[gwNative], cell[gwPromQL], cell[victoria], cell[prometheus],
				ratio(r.med[gwNative], r.med[victoria]), ratio(r.med[gwPromQL], r.med[victoria]),
				ratio(r.med[gwNative], r.med[prometheus]), ratio(r.med[gwPromQL], r.med[prometheus]))
		}
		p("\n")
	}
	total := float64(b.d.total())
	p("| side | loaded by | load time | points/s | gw/peer | on disk | B/point | of which write-ahead log | B/point without it | peak RSS loading | peak RSS serving (warm) | peak RSS (dashboard) |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, name := range []string{b.c.storeName(), "VictoriaMetrics", "Prometheus"} {
		l := b.loads[i]
		if l.dur == 0 {
			continue
		}
		rel := "—"
		if i > 0 && b.loads[0].dur > 0 {
			rel = fmt.Sprintf("%.2f×", l.dur.Seconds()/b.loads[0].dur.Seconds())
		}
		p("| %s | %s | %.1f s | %s | %s | %.1f MiB | %.2f | %.1f MiB | %.2f | %s | %s | %s |\n", name, l.notes, l.dur.Seconds(),
			count(total/l.dur.Seconds()), rel, float64(l.disk)/(1<<20), float64(l.disk)/total,
			float64(l.wal)/(1<<20), float64(l.disk-l.wal)/total, mib(l.rss),
			mibOr(b.serving[i]), mibOr(b.dashRSS[i]))
	}
	for _, n := range b.notes {
		p("\n- %s", n)
	}
	p("\n")
}

func stepText(p panel) string {
	if p.raw {
		return "raw, 10 s"
	}
	return promDuration(p.step()) + " windows"
}

func ratio(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "—"
	}
	r := float64(a) / float64(b)
	switch {
	case r > 1:
		return fmt.Sprintf("**%.2f×**", r)
	case r < 0.1:
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func count(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.2f M", v/1e6)
	}
	return fmt.Sprintf("%.0f k", v/1e3)
}

func mibOr(n int64) string {
	if n == 0 {
		return "—"
	}
	return mib(n)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func version(bin, arg string) string {
	out, err := exec.Command(bin, arg).CombinedOutput()
	if err != nil {
		return bin + " (version unknown)"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// vmVersion is the package's: Debian's build prints none of its own.
func vmVersion() string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "victoria-metrics").Output()
	if err != nil || len(out) == 0 {
		return "VictoriaMetrics (version unknown)"
	}
	return "VictoriaMetrics " + string(out) + " (Debian)"
}
