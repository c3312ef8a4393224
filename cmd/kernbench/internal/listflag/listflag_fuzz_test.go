package listflag

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/check"
)

// FuzzLists: --trace-ranks and --world-sizes either give ranks below
// maxTraceRanks (at most that many) and world sizes 1..check.MaxWorldSize
// (at most check.MaxSizes), each list written back with commas reading as
// itself, or an error naming the flag and its value.
func FuzzLists(f *testing.F) {
	for _, s := range []string{"0,3,8-15", "0-1", "1-16", "2,4,8", "4-1", "-1", "0", "1048575", "0-1048576",
		"9223372036854775807", " 2 , 4 ", "1 - 3", "+3", "", ",", "0x10", "65536", "1-65537"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range []struct {
			flag     string
			parse    func(string) ([]int, error)
			min, max int
			most     int
		}{
			{"--trace-ranks", Ranks, 0, maxTraceRanks - 1, maxTraceRanks},
			{"--world-sizes", WorldSizes, 1, check.MaxWorldSize, check.MaxSizes},
		} {
			got, err := l.parse(s)
			if err != nil {
				if !strings.Contains(err.Error(), l.flag+" "+strconv.Quote(s)) {
					t.Fatalf("%s %q: error does not name it: %v", l.flag, s, err)
				}
				continue
			}
			if len(got) == 0 || len(got) > l.most {
				t.Fatalf("%s %q: %d values", l.flag, s, len(got))
			}
			var back []string
			for _, v := range got {
				if v < l.min || v > l.max {
					t.Fatalf("%s %q: %d out of %d..%d", l.flag, s, v, l.min, l.max)
				}
				back = append(back, strconv.Itoa(v))
			}
			again, err := l.parse(strings.Join(back, ","))
			if err != nil {
				t.Fatalf("%s %q read as %v, which does not read back: %v", l.flag, s, got, err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Fatalf("%s %q read back (-first +again):\n%s", l.flag, s, diff)
			}
		}
	})
}
