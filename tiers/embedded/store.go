package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tsgate/tsgate/tiers"
)

var _ tiers.Store = (*Store)(nil)

// ErrClosed is returned by every operation on a closed store, including
// reads that were still open when it closed.
var ErrClosed = errors.New("embedded: store is closed")

// ErrInUse is returned by Open when another process (or another Open in
// this one) holds the directory.
var ErrInUse = errors.New("directory locked")

// formatVersion is the version of the key and value encoding described in
// the package doc; Open refuses a store written in another one, except
// the formats before it, which it reads as they are and stamps with the
// current one: format 1, before rollup rows kept extras (its rollup rows
// have none), and format 2, before sealed chunks kept decimals as
// Rice-coded integers and rows' extras took their compact forms (Rice-coded
// sketches, decimal counters), all of which this build still decodes. The
// stamp keeps an older build, which decodes none of the newer forms, from
// misreading what this one writes. Format 3 stores predate sealed rollup
// partitions (kindRollupChunk), which an older build would not see.
const formatVersion = 4

// formatBeforeExtras is the format of stores written before rollup rows
// kept extras.
const formatBeforeExtras = 1

// formatBeforeCompactForms is the format of stores written before decimal
// chunks, Rice-coded sketches and decimal counters.
const formatBeforeCompactForms = 2

// formatBeforeSealedRollups is the format of stores written before rollup
// partitions were sealed.
const formatBeforeSealedRollups = 3

// Options configures a store. The zero value is usable.
type Options struct {
	// Now is the clock that decides expiry; time.Now when nil.
	Now func() time.Time
	// Logger receives the store's and Pebble's messages; nil discards them.
	Logger *slog.Logger
	// CacheSize is the size in bytes of Pebble's block cache; 64 MiB when 0.
	CacheSize int64
	// MemTableSize is the size in bytes of one Pebble memtable; 16 MiB when
	// 0. Larger memtables absorb more ingest between flushes, and up to two
	// may be in memory at once.
	MemTableSize uint64
	// SweepInterval is how often the background sweeper deletes expired
	// records; one hour when 0, never when negative (Sweep can still be
	// called directly).
	SweepInterval time.Duration
	// Compression of the tables: "snappy" (or "") or "zstd". Zstd takes
	// rollup rows 15-30 % smaller on disk for more CPU in flushes,
	// compactions and reads that miss the block cache (sealed chunks,
	// already compressed, gain nothing). Tables written before keep
	// their compression until a compaction rewrites them.
	Compression string
}

// ValidCompression reports whether c names a compression Options takes.
func ValidCompression(c string) bool { return c == "" || c == "snappy" || c == "zstd" }

const (
	defaultCacheSize     = 64 << 20
	defaultMemTableSize  = 16 << 20
	defaultSweepInterval = time.Hour
)

// Store is a tiers.Store kept in a Pebble database in one directory. It is
// safe for concurrent use; the directory is locked against other processes.
type Store struct {
	db  *pebble.DB
	now func() time.Time
	log *slog.Logger

	// mu is held shared by every operation that uses db and exclusively by
	// Close, because Pebble panics on use after close.
	mu     sync.RWMutex
	closed bool

	// readsMu guards reads, the open partition reads that Close must release
	// before Pebble lets go of the database.
	readsMu sync.Mutex
	reads   map[*rowPages]struct{}

	// sweepMu is held shared by writes of expiring records and exclusively by
	// the sweeper while it deletes. Without it a row rewritten with a longer
	// retention between the sweeper's scan and its delete would be lost.
	sweepMu sync.RWMutex

	// versionMu makes taking a version for marks or generations and
	// committing them one step, so that versions stored never go back.
	versionMu sync.Mutex

	// labelStripes order SetLabels calls for one series (seriesLock), and
	// labelsMu orders the ones that delete value and name entries after
	// every one that adds entries (see SetLabels).
	labelStripes [seriesLockStripes]labelStripe
	labelsMu     sync.RWMutex

	// secretMu makes get-or-create of a secret atomic: Pebble has no
	// conditional write, and it is single-process, so a mutex is enough.
	secretMu sync.Mutex

	stopSweeper context.CancelFunc
	sweeperDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

// labelStripe is one of the mutexes that order SetLabels calls.
type labelStripe = sync.Mutex

// Open opens the store in dir, creating it when it does not exist.
func Open(dir string, opts Options) (*Store, error) {
	return open(dir, nil, opts)
}

// OpenInMemory opens a store that lives in memory and vanishes on Close.
func OpenInMemory(opts Options) (*Store, error) {
	return open("", vfs.NewMem(), opts)
}

func open(dir string, fs vfs.FS, opts Options) (*Store, error) {
	s := &Store{
		now:   opts.Now,
		log:   opts.Logger,
		reads: make(map[*rowPages]struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	cacheSize := opts.CacheSize
	if cacheSize <= 0 {
		cacheSize = defaultCacheSize
	}
	memTable := opts.MemTableSize
	if memTable == 0 {
		memTable = defaultMemTableSize
	}
	popts := &pebble.Options{
		CacheSize:    cacheSize,
		MemTableSize: memTable,
		Merger:       merger,
		Logger:       pebbleLogger{s.log},
		// Pinned rather than left to Pebble's default, which may change: a
		// newer format is a one-way migration of the directory.
		FormatMajorVersion: pebble.FormatValueSeparation,
	}
	switch opts.Compression {
	case "", "snappy":
	case "zstd":
		for i := range popts.Levels {
			popts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.ZstdCompression }
		}
	default:
		return nil, fmt.Errorf("embedded: compression %q: snappy or zstd", opts.Compression)
	}
	if fs != nil {
		popts.FS = fs
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held") {
			return nil, fmt.Errorf("embedded: the data directory %q is in use by another gateway (one process per directory): stop it, or give this one another --data-dir: %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("embedded: open %q: %w", dir, err)
	}
	s.db = db
	if err := s.checkFormat(); err != nil {
		_ = db.Close()
		return nil, err
	}

	interval := opts.SweepInterval
	if interval == 0 {
		interval = defaultSweepInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopSweeper = cancel
	s.sweeperDone = make(chan struct{})
	if interval > 0 {
		go s.sweepLoop(ctx, interval)
	} else {
		close(s.sweeperDone)
	}
	return s, nil
}

// checkFormat stamps a new store with the format version and refuses a store
// stamped with another.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return s.db.Set(formatKey, int64Value(formatVersion), pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("embedded: read format version: %w", err)
	}
	version := int64(-1)
	if len(v) == int64ValLen {
		version = getInt64(v)
	}
	_ = closer.Close()
	switch version {
	case formatVersion:
		return nil
	case formatBeforeExtras, formatBeforeCompactForms, formatBeforeSealedRollups:
		return s.db.Set(formatKey, int64Value(formatVersion), pebble.Sync)
	}
	return fmt.Errorf("embedded: store has format %x, this build reads formats %d to %d", v, formatBeforeExtras, formatVersion)
}

// nowMs is the store clock in Unix milliseconds.
func (s *Store) nowMs() int64 { return s.now().UnixMilli() }

// enter guards an operation against a concurrent Close; the caller calls
// s.mu.RUnlock when enter succeeds.
func (s *Store) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Ping reports whether the store answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	_, closer, err := s.db.Get(formatKey)
	if err != nil {
		return fmt.Errorf("embedded: ping: %w", err)
	}
	return closer.Close()
}

// Close stops the sweeper, releases any open reads (their Next then returns
// ErrClosed), flushes the memtables so the next Open need not replay the
// log, and closes Pebble. Calling it again returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopSweeper()
		<-s.sweeperDone

		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		s.readsMu.Lock()
		for p := range s.reads {
			p.release(ErrClosed)
		}
		clear(s.reads)
		s.readsMu.Unlock()
		err := s.db.Flush()
		s.closeErr = errors.Join(err, s.db.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("embedded: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// commit applies b durably.
func (s *Store) commit(b *pebble.Batch) error {
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("embedded: commit: %w", err)
	}
	return nil
}

// pebbleLogger routes Pebble's messages to slog.
type pebbleLogger struct{ log *slog.Logger }

// Infof logs at debug level: Pebble's informational messages are routine
// internals (WALs found and replayed) that would drown the gateway's own.
func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf must not return: Pebble calls it when its state is no longer
// consistent and continues as if the process had stopped.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}
