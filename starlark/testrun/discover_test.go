package testrun

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// DiscoverEmbedded lists the shipped *_test.star files under the paths
// given (all without paths), leaving out testdata and hidden folders, and
// refuses a path the shipped files do not hold.
func TestDiscoverEmbedded(t *testing.T) {
	fsys := fstest.MapFS{
		"ccl.yaml":                        {},
		"algorithms/a.star":               {},
		"algorithms/a_test.star":          {},
		"algorithms/b_test.star":          {},
		"algorithms/testdata/x_test.star": {},
		"algorithms/.hidden/y_test.star":  {},
		"benches/l3_test.star":            {},
		"benches/README.md":               {},
	}
	for _, c := range []struct {
		paths []string
		want  []string
		err   string
	}{
		{nil, []string{"algorithms/a_test.star", "algorithms/b_test.star", "benches/l3_test.star"}, ""},
		{[]string{"."}, []string{"algorithms/a_test.star", "algorithms/b_test.star", "benches/l3_test.star"}, ""},
		{[]string{"benches/", "algorithms/b_test.star"}, []string{"algorithms/b_test.star", "benches/l3_test.star"}, ""},
		{[]string{"algorithms", "algorithms/a_test.star"}, []string{"algorithms/a_test.star", "algorithms/b_test.star"}, ""},
		{[]string{"ccl.yaml"}, nil, ""},
		{[]string{"algo"}, nil, "algo: no such file or folder among the files shipped with kernbench (--builtin runs the tests under algorithms/, benches/)"},
	} {
		got, err := DiscoverEmbedded(fsys, c.paths)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if diff := cmp.Diff(c.want, got); diff != "" || msg != c.err {
			t.Errorf("DiscoverEmbedded(%q) error %q, want %q; files (-want +got):\n%s", c.paths, msg, c.err, diff)
		}
	}
}
