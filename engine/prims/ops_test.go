package prims

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// A kernel's plain operations refuse what would corrupt or race before
// they book anything on the machine: a store or copy whose shapes differ,
// a write into what an earlier write still writes (WriteWriteHazard), a
// read of what a handle's write not waited for still writes
// (PendingStoreHazard), and a tile allocation larger than any memory.
// What they do book is counted.
func TestKernelOpsRefuseAndCount(t *testing.T) {
	view := func(k *Kernel, off int64, dt dtype.DType, count int64) *View {
		return &View{Reg: machine.Region{Mem: k.PE.TCM, Off: off, N: count * int64(dt.Size())}, DT: dt, Count: count}
	}
	tile := func(dt dtype.DType, count int64) *Tile { return &Tile{DT: dt, Count: count} }
	tests := []struct {
		name    string
		run     func(k *Kernel) error
		wantErr string
		want    Counts
	}{
		{"store", func(k *Kernel) error {
			_, err := k.Store("tl.store", view(k, 0, dtype.F32, 4), tile(dtype.F32, 4))
			return err
		}, "", Counts{Store: 1}},
		{"store of another dtype", func(k *Kernel) error {
			_, err := k.Store("tl.store", view(k, 0, dtype.F32, 4), tile(dtype.I32, 4))
			return err
		}, "DtypeMismatch: tl.store: rank 0: tile is i32, ptr is f32", Counts{}},
		{"store of another count", func(k *Kernel) error {
			_, err := k.Store("tl.store", view(k, 0, dtype.F32, 4), tile(dtype.F32, 2))
			return err
		}, "OutOfBounds: tl.store: rank 0: tile has 2 elements, ptr has 4", Counts{}},
		{"store over a store under way", func(k *Kernel) error {
			if _, err := k.Store("tl.store_async", view(k, 0, dtype.F32, 4), tile(dtype.F32, 4)); err != nil {
				return err
			}
			_, err := k.Store("tl.store", view(k, 8, dtype.F32, 4), tile(dtype.F32, 4))
			return err
		}, "WriteWriteHazard: tl.store: rank 0 writes tcm[pe 0]@0x20000000008+16 while the tl.store_async still writes tcm[pe 0]@0x20000000000+16 (tl.flush() first, or write elsewhere)", Counts{Store: 1}},
		{"fetch", func(k *Kernel) error {
			_, err := k.FetchLoad("tl.fetch", view(k, 0, dtype.F32, 4))
			return err
		}, "", Counts{Load: 1}},
		{"fetch of what a store not waited for writes", func(k *Kernel) error {
			op, err := k.Store("tl.store_async", view(k, 0, dtype.F32, 4), tile(dtype.F32, 4))
			if err != nil {
				return err
			}
			k.AttachDone(op, new(bool))
			_, err = k.FetchLoad("tl.fetch", view(k, 4, dtype.F32, 1))
			return err
		}, "PendingStoreHazard: tl.fetch: rank 0 reads tcm[pe 0]@0x20000000004+4 while the tl.store_async still writes tcm[pe 0]@0x20000000000+16 (tl.wait(its handle) first)", Counts{Store: 1}},
		{"copy", func(k *Kernel) error {
			return k.Copy("tl.copy", view(k, 64, dtype.F32, 4), &Load{Src: *view(k, 0, dtype.F32, 4)})
		}, "", Counts{}},
		{"copy of another dtype", func(k *Kernel) error {
			return k.Copy("tl.copy", view(k, 64, dtype.F32, 4), &Load{Src: *view(k, 0, dtype.I32, 4)})
		}, "DtypeMismatch: tl.copy: rank 0: dst is f32, src is i32", Counts{}},
		{"copy of another count", func(k *Kernel) error {
			return k.Copy("tl.copy", view(k, 64, dtype.F32, 4), &Load{Src: *view(k, 0, dtype.F32, 3)})
		}, "OutOfBounds: tl.copy: rank 0: dst has 4 elements, src has 3", Counts{}},
		{"a tile larger than any memory", func(k *Kernel) error {
			_, err := k.NewTile("tl.zeros", 1<<30, dtype.F32)
			return err
		}, "OutOfMemory: tl.zeros: 1073741824 × f32 is larger than any memory of the PE (1073741824 bytes)", Counts{}},
		{"tile arithmetic", func(k *Kernel) error {
			var out Tile
			return k.Combine(&out, dtype.Add, tile(dtype.F32, 4), tile(dtype.F32, 4), "Tile +", nil)
		}, "", Counts{Math: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, 1)
			k := &Kernel{M: m, PE: m.Ranks[0], Counts: &Counts{}, Handles: &LoadPool{}}
			got := ""
			if err := tt.run(k); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, *k.Counts); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}
