package msccl

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any input either parses into a schedule that satisfies what
// validation promises, or gives an ErrorList; it never panics.
//
//	go test ./engine/msccl -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	f.Add([]byte(twoGPUs))
	f.Add([]byte(""))
	f.Add([]byte("<algo/>"))
	f.Add([]byte(`<algo ngpus="1" coll="allreduce" nchunksperloop="1"><gpu id="0" i_chunks="1" o_chunks="0"><tb id="0" send="-1" recv="-1"><step s="0" type="nop"/></tb></gpu></algo>`))
	if files, _ := filepath.Glob("../../testdata/msccl/*_4.xml"); len(files) > 0 {
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse("fuzz.xml", data)
		if err != nil {
			if _, ok := err.(ErrorList); !ok {
				t.Fatalf("error %T, want ErrorList: %v", err, err)
			}
			return
		}
		// What a runner relies on: ids index the tables, peers and
		// dependencies are in range, and every send has its receive.
		if len(a.GPUs) != a.NGPUs {
			t.Fatalf("%d gpus for ngpus %d", len(a.GPUs), a.NGPUs)
		}
		for gi, g := range a.GPUs {
			if g.ID != gi {
				t.Fatalf("gpu %d at index %d", g.ID, gi)
			}
			for ti, tb := range g.TBs {
				if tb.ID != ti || tb.Send >= a.NGPUs || tb.Recv >= a.NGPUs {
					t.Fatalf("gpu %d tb %d at index %d: send %d recv %d", g.ID, tb.ID, ti, tb.Send, tb.Recv)
				}
				for si, st := range tb.Steps {
					if st.S != si || st.DepID >= len(g.TBs) || st.DepID >= 0 && st.Deps >= len(g.TBs[st.DepID].Steps) {
						t.Fatalf("gpu %d tb %d step %d: bad reference", g.ID, tb.ID, si)
					}
				}
			}
		}
		_ = a.Matches()
		// --redop avg's analysis runs on any valid schedule of a
		// reduction; its only error is a step completing part of its
		// chunks.
		a.Coll = "allreduce"
		if _, err := a.Completing(nil); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Completing: error %T, want *Error: %v", err, err)
			}
		}
		// The result check runs on any valid schedule of any collective,
		// in place (allreduce's aliasing) or not, and reports per gpu.
		for _, coll := range []string{"allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast", "reduce"} {
			a.Coll = coll
			for _, alias := range []Alias{nil, func(_ int, b Buffer, idx int) (Buffer, int) {
				if b == Output {
					return Input, idx
				}
				return b, idx
			}} {
				if err := a.Races(alias); err != nil {
					if _, ok := err.(ErrorList); !ok {
						t.Fatalf("Races: error %T, want ErrorList: %v", err, err)
					}
				}
				if err := a.CheckResult(alias, 0); err != nil {
					if l, ok := err.(ErrorList); !ok || len(l) > a.NGPUs {
						t.Fatalf("CheckResult(%s): error %T, want at most a problem per gpu: %v", coll, err, err)
					}
				}
			}
		}
	})
}
