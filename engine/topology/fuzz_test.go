package topology

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzDirs mixes builtin names, custom names and names that are not
// identifiers.
var fuzzDirs = []string{"E", "W", "N", "S", "parent", "child_left", "child_right", "x0", "x1", "y", "", "1a"}

// fuzzTopology decodes data into a small topology: the first byte is the
// world size, then every three bytes set one direction (rank, name and
// receive-only bit, peer in [-1, world_size]).
func fuzzTopology(data []byte) *Topology {
	if len(data) == 0 {
		return nil
	}
	p := 1 + int(data[0])%6
	t := &Topology{Name: "custom", Maps: make([]map[string]int, p), RecvOnly: make([]map[string]bool, p)}
	for i := 1; i+2 < len(data); i += 3 {
		r := int(data[i]) % p
		d := fuzzDirs[int(data[i+1]&0x7f)%len(fuzzDirs)]
		peer := int(data[i+2])%(p+2) - 1
		if t.Maps[r] == nil {
			t.Maps[r] = map[string]int{}
		}
		t.Maps[r][d] = peer
		if data[i+1]&0x80 != 0 {
			if t.RecvOnly[r] == nil {
				t.RecvOnly[r] = map[string]bool{}
			}
			t.RecvOnly[r][d] = true
		}
	}
	return t
}

// FuzzValidate checks that Validate never panics, never edits its input, is
// deterministic, and on success returns a pairing that covers every
// direction once and is an involution.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 1, 1, 0})          // ring of 2
	f.Add([]byte{3, 0, 0, 1, 1, 1, 0, 1, 7, 2}) // x0 both ways plus a stray x1
	f.Add([]byte{2, 0, 5, 1, 1, 4, 0, 2, 6, 0}) // parent and children
	f.Add([]byte{0, 0, 10, 0})                  // bad name, self-loop
	f.Fuzz(func(t *testing.T, data []byte) {
		topo := fuzzTopology(data)
		if topo == nil {
			return
		}
		before := topo.Clone()
		pairing, err := Validate(topo)
		if diff := cmp.Diff(before, topo); diff != "" {
			t.Fatalf("Validate changed its input (-want +got):\n%s", diff)
		}
		again, err2 := Validate(topo)
		if !cmp.Equal(pairing, again) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("Validate is not deterministic: %v, %v then %v, %v", pairing, err, again, err2)
		}
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) == 0 {
				t.Fatalf("error %v is not a *ValidationError with problems", err)
			}
			if pairing != nil {
				t.Fatalf("pairing %v returned with error", pairing)
			}
			return
		}
		if len(pairing) != len(topo.Maps) {
			t.Fatalf("pairing has %d ranks, want %d", len(pairing), len(topo.Maps))
		}
		for r, ps := range pairing {
			var got []string
			for _, pr := range ps {
				got = append(got, pr.Dir)
				if peer, ok := topo.Maps[r][pr.Dir]; !ok || peer != pr.Peer {
					t.Fatalf("rank %d pair %+v does not match the map %v", r, pr, topo.Maps[r])
				}
				if pr.RecvOnly != topo.RecvOnly[r][pr.Dir] {
					t.Fatalf("rank %d pair %+v: RecvOnly want %v", r, pr, topo.RecvOnly[r][pr.Dir])
				}
				if !canPair(pr.Dir, pr.PeerDir) {
					t.Fatalf("rank %d pair %+v pairs names that are not reverses", r, pr)
				}
				i := slices.IndexFunc(pairing[pr.Peer], func(q Pair) bool { return q.Dir == pr.PeerDir })
				if i < 0 {
					t.Fatalf("rank %d pair %+v: rank %d has no pair for %q", r, pr, pr.Peer, pr.PeerDir)
				}
				if q := pairing[pr.Peer][i]; q.Peer != r || q.PeerDir != pr.Dir {
					t.Fatalf("not an involution: rank %d %+v, rank %d %+v", r, pr, pr.Peer, q)
				}
			}
			want := slices.Sorted(maps.Keys(topo.Maps[r]))
			if !cmp.Equal(want, got) {
				t.Fatalf("rank %d pairs %v, want every direction once in order %v", r, got, want)
			}
		}
	})
}
