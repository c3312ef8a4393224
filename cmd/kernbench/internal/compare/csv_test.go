package compare

import (
	"bytes"
	"encoding/csv"
	"testing"

	"kernbench/starlark/report"

	"github.com/google/go-cmp/cmp"
)

// CSV's time_us is the simulated time in microseconds divided once from
// its whole picoseconds, so that it reads as the time it is (2916266 ps:
// 2.916266, not 2.9162660000000002 from the nanoseconds divided again).
func TestCSVTimeIsWholePicoseconds(t *testing.T) {
	var rep report.Report
	rep.Algorithm, rep.Collective, rep.Topology, rep.WorldSize = "dbl", "l3l2", "none", 1
	for _, ps := range []int64{2916266, 462000, 672750, 1, 123456789012} {
		rep.Results = append(rep.Results, report.Result{SimTimeNs: float64(ps) / 1000, Verified: true})
	}
	var b bytes.Buffer
	if err := CSV(&b, []Labeled{{Label: "dbl", Rep: &rep}}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r[10])
	}
	want := []string{"2.916266", "0.462", "0.67275", "1e-06", "123456.789012"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("time_us (-want +got):\n%s", diff)
	}
}
