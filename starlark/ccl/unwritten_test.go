package ccl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/starlark/report"
)

// recv buffers large enough that the sentinel is held as a pattern not
// written yet (machine.Region.FillPattern: whole 16 KiB blocks) still
// read as the sentinel wherever the kernel did not write them: unwritten
// elements are reported as never written, in whole blocks, partial ones
// and lines cut by a write; a kernel that reads recvbuf before writing it
// reads the sentinel (a sum into an uninitialised recvbuf stays wrong).
func TestUnwrittenLargeRecvIsReported(t *testing.T) {
	const count = 40000 // f32: 160 000 bytes, about ten blocks
	for _, tc := range []struct {
		name, src string
		dtype     string
		world     int
		want      []report.RankWrong
	}{
		{"written in the middle", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.copy(recvbuf.slice(5001, 10000), sendbuf.slice(5001, 10000))
`, "f32", 2, []report.RankWrong{
			{Rank: 0, Wrong: count, Ranges: []report.WrongRange{{Start: 0, End: 5001, Sentinel: true}, {Start: 5001, End: 15001}, {Start: 15001, End: count, Sentinel: true}}},
			{Rank: 1, Wrong: count, Ranges: []report.WrongRange{{Start: 0, End: 5001, Sentinel: true}, {Start: 5001, End: 15001}, {Start: 15001, End: count, Sentinel: true}}},
		}},
		{"integers, never written", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    pass
`, "i32", 2, []report.RankWrong{
			{Rank: 0, Wrong: count, Ranges: []report.WrongRange{{Start: 0, End: count, Sentinel: true}}},
			{Rank: 1, Wrong: count, Ranges: []report.WrongRange{{Start: 0, End: count, Sentinel: true}}},
		}},
		{"summed into an uninitialised recvbuf", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.store(recvbuf, tl.fetch(recvbuf) + tl.fetch(sendbuf))
`, "f32", 1, []report.RankWrong{
			// (One rank: the sum is its input, right if recvbuf read 0.)
			{Rank: 0, Wrong: count, Ranges: []report.WrongRange{{Start: 0, End: count, Sentinel: true}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "k.star")
			if err := os.WriteFile(file, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Run(file, Options{Embedded: kernbench.Files, WorldSize: tc.world, Counts: []int64{count}, DType: tc.dtype, Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Results[0]
			if diff := cmp.Diff(tc.want, res.WrongRanges); diff != "" {
				t.Errorf("wrong ranges (-want +got):\n%s", diff)
			}
			if res.Phase2Match == nil || !*res.Phase2Match {
				t.Errorf("phase 2: %v %s", res.Phase2Match, res.Phase2)
			}
		})
	}
}
