package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tsgate/tsgate/flagconf"
	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/seal"
	"github.com/tsgate/tsgate/tiers"
)

// importConfig is what `gateway import` is told besides the store.
type importConfig struct {
	url        string
	token      string
	format     string
	batch      int
	parallel   int
	checkpoint string
	resume     bool
	rollups    bool
	seal       bool
	progress   time.Duration
	cpuProfile string
}

// importCheckpoint records how far an import got: every line before
// Offset of input File (an index into Inputs) is acknowledged, and so is
// every earlier input.
type importCheckpoint struct {
	Inputs []string `json:"inputs"`
	File   int      `json:"file"`
	Offset int64    `json:"offset"`
	Points int64    `json:"points"`
}

// importSink writes one batch: into the store, or to a gateway over HTTP.
type importSink interface {
	ImportBatch(ctx context.Context, b ingest.Batch) (ingest.ImportResult, error)
}

// importInput is one input: a file or stdin.
type importInput struct {
	name   string // as given; "-" is stdin
	format string // ndjson or csv
	open   func() (io.ReadCloser, error)
	size   int64 // -1 when unknown
}

// importCmd runs `gateway import`: it reads NDJSON or CSV points from files
// or stdin, writes them in batches cut between windows, several in flight,
// and records after each acknowledged batch how far the input is written,
// so that --resume continues there.
func (m Main) importCmd(ctx context.Context, args []string) error {
	if _, set := m.LookupEnv("GOGC"); !set {
		// A bulk load's live heap is a few batches in flight, while every
		// batch allocates its decoded points and the driver's frames: with
		// the default pacing the collector takes a large share of the CPU
		// for little memory saved.
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	c := defaultServeConfig()
	ic := importConfig{format: "auto", batch: 5000, parallel: 8, rollups: true, seal: true, progress: time.Second}
	fs := flag.NewFlagSet("gateway import", flag.ContinueOnError)
	// Errors are printed below, once, with the hint; help goes to stdout.
	fs.SetOutput(io.Discard)
	usage := func() {
		fs.SetOutput(m.Stdout)
		fmt.Fprint(fs.Output(), `usage: gateway import [flags] [FILE ...]

Imports points of any age from NDJSON ({"series","t","v"} per line) or CSV
(series,t,v with an optional header) files, or stdin when no FILE or "-"
is given, into the configured store or, with --url, through a running
gateway's POST /v1/import. Points the raw tier keeps go to raw partitions;
older ones are aggregated into the tiers that keep them.

flags:
`)
		fs.PrintDefaults()
	}
	c.registerStoreFlags(fs)
	c.RegisterImportFlags(fs)
	gateway.DurationVar(fs, &c.Ingest.ClockSkew, "clock-skew", "how far in the future a point may be")
	fs.StringVar(&ic.url, "url", "", "base URL of a running gateway to import through (default: write to the configured store)")
	fs.StringVar(&ic.token, "token", "", "with --url: bearer token of the write role, when the gateway has tokens")
	fs.StringVar(&ic.format, "format", ic.format, "input format: ndjson, csv, or auto (csv for files named *.csv, else ndjson)")
	fs.IntVar(&ic.batch, "batch", ic.batch, "points per batch (a batch grows to the end of the window it reaches)")
	fs.IntVar(&ic.parallel, "parallel", ic.parallel, "batches in flight")
	fs.StringVar(&ic.checkpoint, "checkpoint", "", "file recording how far the input is written (default: FIRST-FILE.import-checkpoint; required to resume stdin)")
	fs.BoolVar(&ic.resume, "resume", false, "continue after the last acknowledged batch of the checkpoint")
	fs.BoolVar(&ic.rollups, "rollups", ic.rollups, "with the store: run the pending rollups at the end")
	fs.BoolVar(&ic.seal, "seal", ic.seal, "with the store: seal the final raw buckets the import wrote into at the end, those sealed before included (a resumed import seals what the resumed run wrote)")
	fs.StringVar(&ic.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole import to this file (go tool pprof reads it)")
	gateway.DurationVar(fs, &ic.progress, "progress-interval", "how often the progress line is updated")
	if err := flagconf.Parse(fs, args, "GATEWAY_", "config", m.LookupEnv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return errHelp
		}
		fmt.Fprintf(m.Stderr, "gateway import: %v\nrun gateway import -help for the flags\n", err)
		return errUsage
	}
	if err := c.Finish(); err != nil {
		return err
	}
	if ic.batch < 1 || ic.parallel < 1 {
		return errors.New("--batch and --parallel must be at least 1")
	}
	if ic.cpuProfile != "" {
		f, err := os.Create(ic.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if ic.format != "auto" && ic.format != "ndjson" && ic.format != "csv" {
		return fmt.Errorf("--format must be ndjson, csv or auto, not %q", ic.format)
	}
	if err := errors.Join(c.Pyramid.Validate(), c.Import.Validate()); err != nil {
		return err
	}
	inputs, err := m.importInputs(fs.Args(), ic.format)
	if err != nil {
		return err
	}
	if ic.checkpoint == "" && inputs[0].name != "-" {
		ic.checkpoint = inputs[0].name + ".import-checkpoint"
	}
	if ic.resume && ic.checkpoint == "" {
		return errors.New("--resume of stdin needs the --checkpoint of the interrupted run")
	}

	var sink importSink
	var finish func(context.Context) error
	if ic.url != "" {
		sink = &httpImportSink{base: strings.TrimSuffix(ic.url, "/"), token: ic.token, client: &http.Client{Timeout: 5 * time.Minute}}
	} else {
		if err := c.Validate(); err != nil {
			return err
		}
		s, done, err := m.storeImportSink(ctx, c.Config, ic.rollups, ic.seal)
		if err != nil {
			return err
		}
		defer done()
		sink, finish = s, s.finish
	}
	run := &importRun{
		sink: sink, cfg: ic, inputs: inputs, stderr: m.Stderr, now: m.clock(),
		window:   c.Pyramid.Tier(c.Pyramid.Coarsest()).Step,
		rawKeeps: max(0, c.Pyramid.Raw().Retention-c.Import.Margin.Milliseconds()-tiers.Day),
	}
	if err := run.run(ctx); err != nil {
		return err
	}
	if finish != nil {
		return finish(ctx)
	}
	return nil
}

// importInputs names the inputs; a file's size is known, stdin's when it
// is a regular file.
func (m Main) importInputs(names []string, format string) ([]importInput, error) {
	if len(names) == 0 {
		names = []string{"-"}
	}
	var out []importInput
	for _, name := range names {
		in := importInput{name: name, format: format, size: -1}
		if in.format == "auto" {
			in.format = "ndjson"
			if strings.EqualFold(filepath.Ext(name), ".csv") {
				in.format = "csv"
			}
		}
		if name == "-" {
			stdin := m.Stdin
			if stdin == nil {
				stdin = os.Stdin
			}
			if f, ok := stdin.(*os.File); ok {
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					in.size = st.Size()
				}
			}
			in.open = func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }
		} else {
			st, err := os.Stat(name)
			if err != nil {
				return nil, err
			}
			in.size = st.Size()
			in.open = func() (io.ReadCloser, error) { return os.Open(name) }
		}
		out = append(out, in)
	}
	return out, nil
}

// storeImportSink assembles the gateway over the configured store, as
// serve does, and imports through its importer.
func (m Main) storeImportSink(ctx context.Context, c gateway.Config, runRollups, runSeal bool) (*storeSink, func(), error) {
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Nothing reads through the partition cache here.
	c.CacheBytes = 0
	g, err := gateway.Open(ctx, c, gateway.Options{Logger: log, Now: m.clock()})
	if err != nil {
		return nil, nil, err
	}
	closeStore := func() {
		if err := g.Close(); err != nil {
			fmt.Fprintf(m.Stderr, "gateway import: closing the store: %v\n", err)
		}
	}
	sink := &storeSink{Importer: g.Importer, worker: g.Rollups, rollups: runRollups, stderr: m.Stderr}
	if runSeal {
		sink.sealer = g.Sealer // nil for a store that does not seal
	}
	return sink, closeStore, nil
}

type storeSink struct {
	*ingest.Importer
	worker  *rollup.Worker
	rollups bool
	sealer  *seal.Worker
	stderr  io.Writer

	mu    sync.Mutex
	spans map[string]tiers.SeriesInfo // what was written, by series
}

// ImportBatch imports a batch and notes, when the import ends with a seal,
// the times each series got.
func (s *storeSink) ImportBatch(ctx context.Context, b ingest.Batch) (ingest.ImportResult, error) {
	res, err := s.Importer.ImportBatch(ctx, b)
	if err == nil && s.sealer != nil {
		s.note(b.Points)
	}
	return res, err
}

// note widens the spans of the points' series. Input runs through one
// series at a time, so the map is touched once per run, not per point.
func (s *storeSink) note(points []ingest.Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spans == nil {
		s.spans = map[string]tiers.SeriesInfo{}
	}
	for i := 0; i < len(points); {
		id, first, last := points[i].Series, points[i].T, points[i].T
		j := i + 1
		for ; j < len(points) && points[j].Series == id; j++ {
			first, last = min(first, points[j].T), max(last, points[j].T)
		}
		sp, ok := s.spans[id]
		if !ok {
			sp = tiers.SeriesInfo{ID: id, First: first, Last: last}
		}
		sp.First, sp.Last = min(sp.First, first), max(sp.Last, last)
		s.spans[id] = sp
		i = j
	}
}

// finish rolls up the raw points' windows, as a gateway's worker would,
// then seals the final raw buckets the import wrote into: those the seal
// worker has passed would otherwise keep their new points as rows merged
// over their chunks until they expire.
func (s *storeSink) finish(ctx context.Context) error {
	if s.rollups {
		// A forced run takes the whole backlog of the rollup log.
		rep, err := s.worker.RunOnce(ctx, true)
		if err != nil {
			return fmt.Errorf("rollups: %w", err)
		}
		if rep.Slots > 0 {
			fmt.Fprintf(s.stderr, "import: rolled up %v\n", rep.Windows)
		}
	}
	if s.sealer == nil || len(s.spans) == 0 {
		return nil
	}
	spans := slices.Collect(maps.Values(s.spans))
	rep, err := s.sealer.SealSpans(ctx, spans)
	if err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	fmt.Fprintf(s.stderr, "import: sealed %d raw buckets (%d points) and %d rollup partitions (%d rows) in %d chunks in %v\n",
		rep.Buckets, rep.Points, rep.Partitions, rep.Rows, rep.Chunks, rep.Elapsed.Round(time.Millisecond))
	return nil
}

// httpImportSink posts batches to a gateway's POST /v1/import.
type httpImportSink struct {
	base   string
	token  string
	client *http.Client
}

// Import posts the batch as NDJSON; answers other than 5xx and 429 will
// not change on a retry.
func (h *httpImportSink) ImportBatch(ctx context.Context, batch ingest.Batch) (ingest.ImportResult, error) {
	var body bytes.Buffer
	body.Grow(len(batch.Points) * 64)
	for _, id := range slices.Sorted(maps.Keys(batch.Labels)) {
		line, _ := json.Marshal(struct {
			Series string       `json:"series"`
			Labels tiers.Labels `json:"labels"`
		}{id, batch.Labels[id]})
		body.Write(line)
		body.WriteByte('\n')
	}
	for _, p := range batch.Points {
		body.WriteString(`{"series":`)
		body.WriteString(strconv.Quote(p.Series))
		body.WriteString(`,"t":`)
		body.WriteString(strconv.FormatInt(p.T, 10))
		body.WriteString(`,"v":`)
		body.WriteString(strconv.FormatFloat(p.V, 'g', -1, 64))
		body.WriteString("}\n")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/v1/import", bytes.NewReader(body.Bytes()))
	if err != nil {
		return ingest.ImportResult{}, permanentError{err}
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return ingest.ImportResult{}, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return ingest.ImportResult{}, err
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		var a struct {
			Points     int              `json:"points"`
			Raw        int              `json:"raw"`
			Aggregated map[string]int   `json:"aggregated"`
			Windows    map[string]int64 `json:"windows"`
			Dropped    int              `json:"dropped"`
		}
		if err := json.Unmarshal(b, &a); err != nil {
			return ingest.ImportResult{}, permanentError{fmt.Errorf("%s/v1/import answered %s", h.base, b)}
		}
		return ingest.ImportResult{Points: a.Points, Raw: a.Raw, Aggregated: a.Aggregated, Windows: a.Windows, Dropped: a.Dropped}, nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return ingest.ImportResult{}, fmt.Errorf("%s/v1/import: %s: %s", h.base, resp.Status, bytes.TrimSpace(b))
	default:
		return ingest.ImportResult{}, permanentError{fmt.Errorf("%s/v1/import: %s: %s", h.base, resp.Status, bytes.TrimSpace(b))}
	}
}

// importRun is one run of gateway import over its inputs.
type importRun struct {
	sink   importSink
	cfg    importConfig
	inputs []importInput
	stderr io.Writer
	now    func() time.Time
	// window is the step of the coarsest tier: batches are cut between
	// its windows of a series, so that every window of history is written
	// whole by one batch.
	window int64
	// rawKeeps is how far back points surely go to the raw partitions,
	// where batches may be cut anywhere: the raw retention less the import
	// margin and a day, for the edge moving on while the import runs; 0
	// when unknown.
	rawKeeps int64

	mu         sync.Mutex
	seq        int
	total      ingest.ImportResult
	started    time.Time
	startBytes int64 // doneBytes when this run started
	doneBytes  int64 // of earlier inputs and acknowledged lines
	readBytes  int64 // of the whole input read so far
	lastPrint  time.Time
}

// batch is a run of lines of one input, [from, to) in bytes.
type batch struct {
	seq      int
	file     int
	from, to int64
	points   []ingest.Point
	// labels are the labels the input gave the series of these points
	// (every batch of a series carries them: batches in flight are
	// written in any order, and the first to arrive creates the series),
	// or, in a batch of no points, of series given no points.
	labels map[string]tiers.Labels
}

func (r *importRun) run(ctx context.Context) error {
	cp := importCheckpoint{Inputs: make([]string, len(r.inputs))}
	for i, in := range r.inputs {
		cp.Inputs[i] = in.name
	}
	if r.cfg.resume {
		b, err := os.ReadFile(r.cfg.checkpoint)
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		var saved importCheckpoint
		if err := json.Unmarshal(b, &saved); err != nil {
			return fmt.Errorf("--resume: checkpoint %s: %w", r.cfg.checkpoint, err)
		}
		if !slices.Equal(saved.Inputs, cp.Inputs) {
			return fmt.Errorf("--resume: checkpoint %s is of the inputs %q, not %q", r.cfg.checkpoint, saved.Inputs, cp.Inputs)
		}
		cp = saved
		fmt.Fprintf(r.stderr, "import: resuming %s at byte %d (%d points written before)\n", r.inputs[cp.File].name, cp.Offset, cp.Points)
	}
	r.started = r.now()
	r.total = ingest.ImportResult{Aggregated: map[string]int{}, Windows: map[string]int64{}}
	for i := range cp.File {
		if s := r.inputs[i].size; s > 0 {
			r.doneBytes += s
		}
	}
	r.doneBytes += cp.Offset
	r.readBytes, r.startBytes = r.doneBytes, r.doneBytes

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan batch)
	var readErr error
	go func() {
		defer close(batches)
		for i := cp.File; i < len(r.inputs); i++ {
			start := int64(0)
			if i == cp.File {
				start = cp.Offset
			}
			if err := r.read(ctx, i, start, batches); err != nil {
				readErr = err
				return
			}
		}
	}()

	// Batches complete in any order; the checkpoint advances over the
	// longest acknowledged prefix.
	type result struct {
		b   batch
		res ingest.ImportResult
		err error
	}
	// Buffered, and the slot is freed before the result is handed over, so
	// that a slow checkpoint write never holds a batch back.
	results := make(chan result, r.cfg.parallel)
	sem := make(chan struct{}, r.cfg.parallel)
	var wg sync.WaitGroup
	go func() {
		for b := range batches {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := r.importBatch(ctx, ingest.Batch{Points: b.points, Labels: b.labels})
				<-sem
				results <- result{b, res, err}
			}()
		}
		wg.Wait()
		close(results)
	}()
	pending := map[int]result{}
	next := 0
	var firstErr error
	// The checkpoint is written at most every checkpointEvery while all
	// goes well, and once more when the run stops: a run killed outright
	// resumes at most that much earlier, which writes the same rows again.
	var lastCheckpoint time.Time
	unsaved := false
	save := func() error {
		if r.cfg.checkpoint == "" || !unsaved {
			return nil
		}
		unsaved = false
		lastCheckpoint = time.Now()
		return writeCheckpoint(r.cfg.checkpoint, cp)
	}
	for res := range results {
		if res.err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s, bytes %d-%d: %w", r.inputs[res.b.file].name, res.b.from, res.b.to, res.err)
				cancel()
			}
			continue
		}
		pending[res.b.seq] = res
		advanced := false
		for {
			done, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if firstErr != nil {
				continue // the checkpoint stays before the failed batch
			}
			r.add(done.res, done.b)
			cp.File, cp.Offset, cp.Points = done.b.file, done.b.to, cp.Points+int64(len(done.b.points))
			advanced = true
		}
		if advanced && firstErr == nil {
			unsaved = true
			if time.Since(lastCheckpoint) >= checkpointEvery {
				if err := save(); err != nil {
					firstErr = err
					cancel()
				}
			}
		}
		r.printProgress(false)
	}
	if firstErr == nil && readErr != nil {
		firstErr = readErr
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	r.printProgress(true)
	if firstErr != nil {
		if err := save(); err != nil {
			return errors.Join(firstErr, err)
		}
		if r.cfg.checkpoint != "" {
			return fmt.Errorf("%w\nwhat was acknowledged is recorded in %s; run the same command with --resume to continue", firstErr, r.cfg.checkpoint)
		}
		return firstErr
	}
	if r.cfg.checkpoint != "" {
		if err := os.Remove(r.cfg.checkpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	r.summary()
	return nil
}

// permanentError is a failure that the same batch would meet again.
type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// importBatch writes one batch, retrying a few times on failures that may
// pass (a store timeout, a gateway restarting): a batch is safe to write
// again.
func (r *importRun) importBatch(ctx context.Context, b ingest.Batch) (ingest.ImportResult, error) {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ingest.ImportResult{}, ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 500 * time.Millisecond):
			}
		}
		var res ingest.ImportResult
		res, err = r.sink.ImportBatch(ctx, b)
		var ve *ingest.ValidationError
		var pe permanentError
		if err == nil || ctx.Err() != nil || errors.As(err, &ve) || errors.As(err, &pe) {
			return res, err
		}
	}
	return ingest.ImportResult{}, err
}

// checkpointEvery bounds how often the checkpoint file is rewritten.
const checkpointEvery = 250 * time.Millisecond

func writeCheckpoint(path string, cp importCheckpoint) error {
	b, _ := json.Marshal(cp)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// read cuts input i, from byte start on, into batches. A batch ends
// between two lines whose (series, window) differ, once it holds the
// batch size; lines are decoded by the API's decoders, a batch at a time,
// so that the rules are those of POST /v1/import.
func (r *importRun) read(ctx context.Context, i int, start int64, out chan<- batch) error {
	in := r.inputs[i]
	rc, err := in.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	var src io.Reader = rc
	if start > 0 {
		if s, ok := rc.(io.Seeker); ok {
			if _, err := s.Seek(start, io.SeekStart); err != nil {
				return err
			}
		} else if _, err := io.CopyN(io.Discard, rc, start); err != nil {
			return fmt.Errorf("%s: skipping to byte %d: %w", in.name, start, err)
		}
	}
	br := bufio.NewReaderSize(src, 1<<20)
	decode := ingest.DecodeNDJSON
	if in.format == "csv" {
		decode = ingest.DecodeCSV
	}
	var (
		labels map[string]tiers.Labels // given by label lines
		unsent map[string]bool         // ... and not sent with any batch yet
		sent   = start                 // where the last batch sent ended
		lines  []byte                  // the pending lines, trimmed and newline-terminated
		starts []int64                 // each pending line's offset in the input
		ends   []int64                 // ... and the offset after it
		lineNo []int64                 // ... and its number, counted from start
		sizes  []int                   // ... and its length in lines
		try    = r.cfg.batch
		// The points of the first len(decoded) pending lines, which are
		// the first decodedBytes of lines: a cut decodes only the lines
		// read since, not again those it could not cut before (a batch
		// ends on a window boundary, which may be many lines on).
		decoded      []ingest.Point
		decodedBytes int
	)
	// cut sends the batches the pending lines make: at the end of the
	// input all of them, else those that end at a window boundary once
	// there are a batch's worth of lines.
	cut := func(final bool) error {
		for len(ends) > 0 && (final || len(ends) >= try) {
			if len(decoded) < len(ends) {
				got, err := decode(bytes.NewReader(lines[decodedBytes:]), r.now().UnixMilli())
				if err != nil {
					return lineError(in.name, start > 0, lineNo[len(decoded):], err)
				}
				if len(got.Points) != len(ends)-len(decoded) {
					return fmt.Errorf("%s: %d points decoded from the %d lines from line %d", in.name, len(got.Points), len(ends)-len(decoded), lineNo[len(decoded)])
				}
				decoded, decodedBytes = append(decoded, got.Points...), len(lines)
			}
			points := decoded
			k := len(points)
			if !final || k > r.cfg.batch {
				k = r.cutAt(points)
				if k == 0 {
					if !final && len(points) < 64*r.cfg.batch {
						try = len(ends) + r.cfg.batch // one window so far: read on
						return nil
					}
					k = min(len(points), 64*r.cfg.batch) // a window larger than any batch should be: split it
				}
			}
			used := 0
			for _, n := range sizes[:k] {
				used += n
			}
			// Its own copy: decoded is reused for the lines after it.
			b := batch{seq: r.nextSeq(), file: i, from: starts[0], to: ends[k-1], points: slices.Clone(points[:k])}
			if len(labels) > 0 {
				b.labels = batchLabels(points[:k], labels, unsent)
			}
			sent = ends[k-1]
			select {
			case out <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			// Moved to the front rather than resliced, so that the appends
			// that follow reuse the room instead of growing new arrays.
			lines = lines[:copy(lines, lines[used:])]
			decoded, decodedBytes = decoded[:copy(decoded, decoded[k:])], decodedBytes-used
			starts, ends = starts[:copy(starts, starts[k:])], ends[:copy(ends, ends[k:])]
			lineNo, sizes = lineNo[:copy(lineNo, lineNo[k:])], sizes[:copy(sizes, sizes[k:])]
			try = r.cfg.batch
		}
		if final && len(unsent) > 0 {
			// Labels of series given no points still reach the index.
			// Acknowledged, it moves the checkpoint no further than the
			// last batch did: a resume reads the label lines again, which
			// is harmless.
			b := batch{seq: r.nextSeq(), file: i, from: sent, to: sent, labels: map[string]tiers.Labels{}}
			for id := range unsent {
				b.labels[id] = labels[id]
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			unsent = nil
		}
		return nil
	}
	offset, n := start, int64(0)
	first := start == 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("%s: line %d is longer than 1 MiB", in.name, n+1)
		}
		if len(line) > 0 {
			lineStart := offset
			offset += int64(len(line))
			n++
			r.addRead(int64(len(line)))
			trimmed := bytes.TrimSpace(line)
			skip := len(trimmed) == 0
			if first && !skip {
				first = false
				skip = in.format == "csv" && isCSVHeader(trimmed)
			}
			if !skip && in.format != "csv" && bytes.Contains(trimmed, []byte(`"labels"`)) {
				// A label line: its labels go with the next batch, which
				// writes them before its points.
				got, err := ingest.DecodeLabelLine(trimmed)
				if err != nil {
					return lineError(in.name, start > 0, []int64{n}, err)
				}
				if got != nil {
					if labels == nil {
						labels, unsent = map[string]tiers.Labels{}, map[string]bool{}
					}
					maps.Copy(labels, got)
					for id := range got {
						unsent[id] = true
					}
					skip = true
				}
			}
			if !skip {
				lines = append(lines, trimmed...)
				lines = append(lines, '\n')
				starts = append(starts, lineStart)
				ends = append(ends, offset)
				lineNo = append(lineNo, n)
				sizes = append(sizes, len(trimmed)+1)
				if err := cut(false); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return cut(true)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// batchLabels returns the labels of the series of points that label lines
// gave, and marks them sent.
func batchLabels(points []ingest.Point, labels map[string]tiers.Labels, unsent map[string]bool) map[string]tiers.Labels {
	var out map[string]tiers.Labels
	prev := ""
	for _, p := range points {
		if p.Series == prev {
			continue
		}
		prev = p.Series
		l, ok := labels[p.Series]
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]tiers.Labels{}
		}
		out[p.Series] = l
		delete(unsent, p.Series)
	}
	return out
}

// cutAt returns the largest k with 0 < k < len(points) at which a batch
// may end: points k-1 and k lie in different (series, window), or both go
// to the raw partitions, where every point stands alone. The last point
// is no cut, since the next line may continue its window; 0 when there is
// none. In a pyramid of the raw tier alone there are no windows: every
// point stands alone.
func (r *importRun) cutAt(points []ingest.Point) int {
	if r.window == 0 {
		return max(0, len(points)-1)
	}
	rawFrom := r.now().UnixMilli() - r.rawKeeps
	for k := len(points) - 1; k > 0; k-- {
		a, b := points[k-1], points[k]
		if a.Series != b.Series || tiers.AlignDown(a.T, r.window) != tiers.AlignDown(b.T, r.window) ||
			r.rawKeeps > 0 && a.T >= rawFrom && b.T >= rawFrom {
			return k
		}
	}
	return 0
}

func isCSVHeader(line []byte) bool {
	f := bytes.Split(line, []byte{','})
	if len(f) != 3 {
		return false
	}
	for i, want := range []string{"series", "t", "v"} {
		if !strings.EqualFold(strings.Trim(strings.TrimSpace(string(f[i])), `"`), want) {
			return false
		}
	}
	return true
}

// lineError names the input lines of a batch's validation errors.
func lineError(name string, resumed bool, lineNo []int64, err error) error {
	var ve *ingest.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", name, err)
	}
	from := "line"
	if resumed {
		from = "line (counted from the resumption point)"
	}
	var msgs []string
	for _, fe := range ve.Errors {
		param := fe.Param
		var idx int
		var field string
		if _, err := fmt.Sscanf(fe.Param, "points[%d]", &idx); err == nil && idx >= 0 && idx < len(lineNo) {
			if j := strings.Index(fe.Param, "]."); j >= 0 {
				field = " " + fe.Param[j+2:]
			}
			param = fmt.Sprintf("%s %d%s", from, lineNo[idx], field)
		}
		msgs = append(msgs, param+": "+fe.Message)
	}
	return fmt.Errorf("%s: invalid input, nothing of this batch was written:\n  %s", name, strings.Join(msgs, "\n  "))
}

func (r *importRun) nextSeq() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.seq
	r.seq++
	return n
}

func (r *importRun) addRead(n int64) {
	r.mu.Lock()
	r.readBytes += n
	r.mu.Unlock()
}

func (r *importRun) add(res ingest.ImportResult, b batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total.Points += res.Points
	r.total.Raw += res.Raw
	r.total.Dropped += res.Dropped
	for k, v := range res.Aggregated {
		r.total.Aggregated[k] += v
	}
	for k, v := range res.Windows {
		r.total.Windows[k] += v
	}
	r.doneBytes = r.inputOffset(b.file) + b.to
}

// inputOffset is the bytes of the inputs before input i, as far as known.
func (r *importRun) inputOffset(i int) int64 {
	var n int64
	for _, in := range r.inputs[:i] {
		n += max(in.size, 0)
	}
	return n
}

// printProgress updates the progress line on stderr: points written, their
// rate, and with a known input size the share done and the time left.
func (r *importRun) printProgress(final bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !final && now.Sub(r.lastPrint) < r.cfg.progress {
		return
	}
	r.lastPrint = now
	elapsed := now.Sub(r.started).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(r.total.Points) / elapsed
	}
	line := fmt.Sprintf("import: %d points, %.0f points/s", r.total.Points, rate)
	var size int64
	known := true
	for _, in := range r.inputs {
		if in.size < 0 {
			known = false
		}
		size += max(in.size, 0)
	}
	if known && size > 0 {
		frac := float64(r.doneBytes) / float64(size)
		line += fmt.Sprintf(", %.1f%% of %s", 100*frac, byteSize(size))
		if frac > 0 && frac < 1 && elapsed > 0 {
			// The rate of bytes since the start of this run.
			done := float64(r.doneBytes - r.startBytes)
			if done > 0 {
				eta := time.Duration(float64(size-r.doneBytes) / (done / elapsed) * float64(time.Second))
				line += ", ETA " + eta.Round(time.Second).String()
			}
		}
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(r.stderr, "\r%-78s%s", line, end)
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func (r *importRun) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.total
	var agg, win []string
	for _, k := range slices.Sorted(maps.Keys(t.Aggregated)) {
		agg = append(agg, fmt.Sprintf("%s %d", k, t.Aggregated[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Windows)) {
		win = append(win, fmt.Sprintf("%s %d", k, t.Windows[k]))
	}
	fmt.Fprintf(r.stderr, "import: %d points in %s: %d to raw partitions, aggregated into [%s], windows written [%s], %d dropped (older than every tier keeps)\n",
		t.Points, r.now().Sub(r.started).Round(time.Millisecond), t.Raw, strings.Join(agg, ", "), strings.Join(win, ", "), t.Dropped)
}
