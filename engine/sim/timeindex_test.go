package sim

import (
	"math/rand/v2"
	"testing"
)

// The time index agrees with a map under random puts, gets and removes
// (clustered times make long probe runs and wrap-arounds, where
// backward-shift deletion can go wrong).
func TestTimeIndexMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	var x timeIndex
	ref := map[Time]*bucket{}
	var keys []Time
	for step := 0; step < 200000; step++ {
		switch op := rng.IntN(3); {
		case op == 0 || len(keys) == 0:
			at := Time(rng.IntN(4096)) * Time(1+rng.IntN(3))
			if ref[at] != nil {
				continue
			}
			b := &bucket{at: at}
			x.put(b)
			ref[at] = b
			keys = append(keys, at)
		case op == 1:
			i := rng.IntN(len(keys))
			at := keys[i]
			x.remove(at)
			delete(ref, at)
			keys[i] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
		default:
			at := Time(rng.IntN(4096 * 3))
			if got, want := x.get(at), ref[at]; got != want {
				t.Fatalf("step %d: get(%v) = %p, want %p", step, at, got, want)
			}
		}
		if x.n != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", step, x.n, len(ref))
		}
	}
	for at, b := range ref {
		if x.get(at) != b {
			t.Fatalf("get(%v) lost its bucket", at)
		}
	}
}
