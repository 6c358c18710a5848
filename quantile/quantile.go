// Package quantile is the quantile sketch rollup rows keep of their
// windows: a DDSketch (github.com/DataDog/sketches-go) with a relative
// accuracy of 1 %, mergeable across windows, tiers and series, and
// stored without its index mapping (the mapping is fixed, so every reader
// knows it) in the shorter of two encodings: the Rice format of this
// package, which codes each bin's count as the miss of a prediction from
// the bins before it (a day of heavy-tailed latencies in a third of the
// bytes), or the library's compact binary encoding, which stores written
// before the Rice format hold and which still decodes.
//
// # Accuracy
//
// Values are mapped to logarithmic bins: every value of a bin lies
// within RelativeAccuracy of the bin's representative value, so the
// quantile a sketch answers is within 1 % of the exact quantile, as long
// as the bin that holds it was kept. Each side of zero keeps at most
// MaxBins bins; when the values of one side span more than that
// (a factor of about 8·10^8 between the largest and the smallest
// magnitude), the bins of the smallest magnitudes are collapsed into
// one (the library's collapsing-lowest dense store). Then the quantiles
// whose values lie among those smallest magnitudes — the lowest
// quantiles of positive data, the quantiles next to zero of negative
// data — lose the bound; every quantile whose value lies within a factor
// of Span of the largest magnitude on its side keeps it (Exact tells).
// An encoding longer than MaxEncodedLen is collapsed further, halving the
// bins until it fits, so that no row grows past its bound whatever the
// data.
//
// Values whose magnitude is below the mapping's smallest indexable value
// (about 1e-308) count as zero; magnitudes above its largest (about
// 1.8e308) count as that largest value.
//
// # Rank
//
// A quantile q of n values is the value at 0-based position
// ⌊q·(n−1)⌋ of the values in ascending order (Rank), on both sides of
// zero. (The library's own GetValueAtQuantile rounds the other way among
// negative values; this package does not use it.)
package quantile

import (
	"fmt"
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// RelativeAccuracy is the sketches' relative accuracy: 1 %.
const RelativeAccuracy = 0.01

// MaxBins bounds the bins of each side of zero. 1024 bins of a factor
// γ = 1.01/0.99 each span a factor γ^1023 ≈ 8·10^8: from a microsecond to
// 800 seconds, say, with no collapse.
const MaxBins = 1024

// MaxEncodedLen bounds an encoded sketch: rollup rows stay under 2 KiB
// with the rest of what they keep.
const MaxEncodedLen = 1984

// theMapping is the one index mapping of every sketch; it is immutable
// and shared.
var theMapping = mustMapping()

func mustMapping() *mapping.LogarithmicMapping {
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		panic(err)
	}
	return m
}

// MinMagnitude is the smallest magnitude a sketch tells from zero.
var MinMagnitude = theMapping.MinIndexableValue()

// Span is about the factor between the largest magnitude of a side of
// zero and the smallest one whose quantiles keep the accuracy bound when
// bins were collapsed: γ^(MaxBins-1) (see Kept for the exact rule).
var Span = math.Pow(theMapping.Value(1)/theMapping.Value(0), MaxBins-1)

// Sketch is a mutable quantile sketch. The zero value is not usable: use
// New or Decode. A Sketch is not safe for concurrent use.
type Sketch struct {
	dd *ddsketch.DDSketch
	// bins is the bound of each store: MaxBins, or less once an encoding
	// had to be collapsed further to fit.
	bins int
}

// New returns an empty sketch.
func New() *Sketch { return newWithBins(MaxBins) }

func newWithBins(bins int) *Sketch {
	return &Sketch{dd: ddsketch.NewDDSketch(theMapping, store.NewCollapsingLowestDenseStore(bins), store.NewCollapsingLowestDenseStore(bins)), bins: bins}
}

// clamp maps a value to one the sketch can hold: magnitudes beyond the
// largest indexable value count as that value. NaN is refused by callers
// (points are finite).
func clamp(v float64) float64 {
	if hi := theMapping.MaxIndexableValue(); v > hi {
		return hi
	} else if v < -hi {
		return -hi
	}
	return v
}

// Add adds one value.
func (s *Sketch) Add(v float64) { s.AddN(v, 1) }

// AddN adds a value n times.
func (s *Sketch) AddN(v float64, n int64) {
	if n <= 0 || math.IsNaN(v) {
		return
	}
	_ = s.dd.AddWithCount(clamp(v), float64(n)) // cannot fail once clamped
}

// Merge adds every value of o.
func (s *Sketch) Merge(o *Sketch) {
	_ = s.dd.MergeWith(o.dd) // one mapping: cannot fail
}

// MergeEncoded adds every value of an encoded sketch (see AppendBinary)
// without decoding it into a sketch first.
func (s *Sketch) MergeEncoded(b []byte) error {
	if len(b) > 0 && b[0] == riceFormat {
		if err := s.mergeRice(b); err != nil {
			return fmt.Errorf("quantile: %w", err)
		}
		return nil
	}
	if err := s.mergeLibrary(b); err != nil {
		return fmt.Errorf("quantile: corrupt sketch: %w", err)
	}
	return nil
}

// mergeLibrary adds the values of the library's encoding. The library
// indexes its bins without checking them (sketches-go v1.4.8): an index
// far outside the mapping's range, which only a corrupt row holds, panics
// in the collapsing store or lands where no value maps; either is an
// error here.
func (s *Sketch) mergeLibrary(b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bins out of range (%v)", p)
		}
	}()
	if err := s.dd.DecodeAndMergeWith(b); err != nil {
		return err
	}
	for _, st := range [2]store.Store{s.dd.GetPositiveValueStore(), s.dd.GetNegativeValueStore()} {
		if st.IsEmpty() {
			continue
		}
		lo, _ := st.MinIndex()
		hi, _ := st.MaxIndex()
		if lo < minIndex || hi > maxIndex {
			return fmt.Errorf("bins %d to %d outside the mapping's %d to %d", lo, hi, minIndex, maxIndex)
		}
	}
	if n, z := s.dd.GetCount(), s.dd.GetZeroCount(); !(n >= 0 && n <= maxRiceCount && z >= 0) {
		return fmt.Errorf("a count of %g values, %g of them zeros", n, z)
	}
	return nil
}

// Decode returns the sketch an encoding holds.
func Decode(b []byte) (*Sketch, error) {
	s := New()
	if err := s.MergeEncoded(b); err != nil {
		return nil, err
	}
	return s, nil
}

// Count is the number of values added.
func (s *Sketch) Count() int64 { return int64(math.Round(s.dd.GetCount())) }

// Rank is the 0-based position, in ascending order, of the value a
// quantile q of n values is: ⌊q·(n−1)⌋. Tests computing exact quantiles
// use it too, so that both agree on the convention.
func Rank(q float64, n int64) int64 {
	if n <= 0 {
		return 0
	}
	r := int64(math.Floor(float64(q * float64(n-1))))
	return min(max(r, 0), n-1)
}

// Quantile returns the value at quantile q (0 ≤ q ≤ 1) of the sketch's
// values, or false for an empty sketch.
func (s *Sketch) Quantile(q float64) (float64, bool) {
	n := s.Count()
	if n == 0 || math.IsNaN(q) {
		return math.NaN(), false
	}
	rank := float64(Rank(q, n))
	neg, pos := s.dd.GetNegativeValueStore(), s.dd.GetPositiveValueStore()
	negCount := neg.TotalCount()
	switch {
	case rank < negCount:
		// The negative store holds magnitudes: the value at ascending
		// position rank has the magnitude at position negCount-1-rank.
		return -theMapping.Value(neg.KeyAtRank(negCount - 1 - rank)), true
	case rank < negCount+s.dd.GetZeroCount():
		return 0, true
	default:
		return theMapping.Value(pos.KeyAtRank(rank - negCount - s.dd.GetZeroCount())), true
	}
}

// collapsed returns the sketch with at most bins bins a side. Bin by
// bin: the library's merge into an empty store narrower than the range
// merged fails (sketches-go v1.4.8).
func (s *Sketch) collapsed(bins int) *Sketch {
	out := newWithBins(bins)
	for _, st := range [2][2]store.Store{
		{s.dd.GetPositiveValueStore(), out.dd.GetPositiveValueStore()},
		{s.dd.GetNegativeValueStore(), out.dd.GetNegativeValueStore()},
	} {
		st[0].ForEach(func(index int, count float64) bool {
			st[1].AddWithCount(index, count)
			return false
		})
	}
	_ = out.dd.AddWithCount(0, s.dd.GetZeroCount())
	return out
}

// Kept reports whether a quantile whose exact value is v keeps the
// accuracy bound in a sketch of values whose largest magnitude on v's side
// of zero is maxAbs, while no encoding of it was collapsed further (see
// AppendBinary): a store keeps the MaxBins bins up to maxAbs's, the lowest
// of them holding what was collapsed below it, so the bound holds for
// every value at or above that lowest bin.
func Kept(v, maxAbs float64) bool {
	v, maxAbs = math.Abs(clamp(v)), math.Abs(clamp(maxAbs))
	if v <= theMapping.MinIndexableValue() {
		return true
	}
	return theMapping.Index(v) >= theMapping.Index(maxAbs)-MaxBins+1
}

// Bins is the bound on the bins of each side of zero: MaxBins unless an
// encoding had to collapse the sketch further.
func (s *Sketch) Bins() int { return s.bins }

// AppendBinary appends the sketch in the shorter of two encodings: the
// Rice format (see rice.go), or the library's binary encoding without the
// index mapping. An encoding longer than MaxEncodedLen is collapsed to
// half the bins, again until it fits (see the package doc), and s keeps
// the collapsed form.
func (s *Sketch) AppendBinary(b []byte) []byte {
	start := len(b)
	for {
		rice, libraryMin, ok := s.appendRice(b)
		if ok && len(rice)-start <= libraryMin {
			// No shorter than the library's could be: no need to make it.
			b = rice
		} else {
			riceEnd := len(rice)
			s.dd.Encode(&rice, true)
			if ok && riceEnd-start < len(rice)-riceEnd {
				b = rice[:riceEnd]
			} else {
				b = append(rice[:start], rice[riceEnd:]...)
			}
		}
		if len(b)-start <= MaxEncodedLen || s.bins <= 1 {
			return b
		}
		b = b[:start]
		*s = *s.collapsed(s.bins / 2)
	}
}

// SameBin reports whether a and b fall into one bin of the sketch (both
// zero, or of one sign and one index), so that every value between them
// does too.
func SameBin(a, b float64) bool {
	a, b = clamp(a), clamp(b)
	zero := theMapping.MinIndexableValue()
	switch {
	case math.Abs(a) <= zero || math.Abs(b) <= zero:
		return math.Abs(a) <= zero && math.Abs(b) <= zero
	case (a < 0) != (b < 0):
		return false
	default:
		return theMapping.Index(math.Abs(a)) == theMapping.Index(math.Abs(b))
	}
}

// Derivable reports whether the sketch of count values whose least is lo
// and greatest hi is known from those three numbers alone: one value,
// two values (lo and hi), or all of them in one bin. Such a sketch need
// not be stored; Derive rebuilds it.
func Derivable(lo, hi float64, count int64) bool {
	return count >= 1 && (count <= 2 || SameBin(lo, hi))
}

// Derive rebuilds a sketch Derivable says is known from lo, hi and count.
func Derive(lo, hi float64, count int64) *Sketch {
	s := New()
	s.AddDerived(lo, hi, count)
	return s
}

// AddDerived adds the values of a sketch Derivable says is known from
// lo, hi and count.
func (s *Sketch) AddDerived(lo, hi float64, count int64) {
	switch {
	case count == 1:
		s.Add(lo)
	case count == 2:
		s.Add(lo)
		s.Add(hi)
	default:
		s.AddN(lo, count)
	}
}
