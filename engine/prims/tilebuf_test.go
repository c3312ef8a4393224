package prims

import (
	"testing"

	"kernbench/engine/machine"
)

// A piece's bytes go back to the PE's pool when the last of their
// readers (the holder and each watched store) is done, not before; under
// timing-only there are no bytes and no owner.
func TestTileBuf_LastReaderGivesBytesBack(t *testing.T) {
	tests := []struct {
		name   string
		stores int
	}{
		{"no store", 0},
		{"one store", 1},
		{"two stores", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, 1)
			var bs TileBufs
			if b := bs.New(m.PE(0), nil); b != nil {
				t.Fatal("bytes-less data got an owner")
			}
			b := bs.New(m.PE(0), make([]byte, 64))
			ops := make([]*machine.MemOp, tt.stores)
			for i := range ops {
				ops[i] = &machine.MemOp{}
				b.Watch(ops[i])
				if ops[i].Watcher != b {
					t.Fatal("the store does not report to the owner")
				}
			}
			b.Release() // the holder's
			for i, op := range ops {
				if b.data == nil {
					t.Fatalf("the bytes went back with %d of %d stores not done", len(ops)-i, len(ops))
				}
				b.OpDone(op)
			}
			if b.data != nil || len(bs.free) != 1 {
				t.Fatalf("after the last reader: data %v, %d free owners; want none and 1", b.data != nil, len(bs.free))
			}
			if again := bs.New(m.PE(0), make([]byte, 8)); again != b {
				t.Error("a free owner is not reused")
			}
		})
	}
}
