package machine

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// A region filled with a pattern (FillPattern) reads, after any mix of
// overwrites, partial writes, reads and allocations, exactly as a region
// written with the pattern at once and then the same writes: the model
// is a plain slice. Overwrites of whole blocks in 4 KiB pieces write no
// pattern (the blocks end done without a read).
func TestFillPatternReadsAsWrittenAtOnce(t *testing.T) {
	const block = 1 << preRunBlockShift
	const pattern uint64 = 0x7fc00000_7fc00000 // two f32 NaNs
	type op struct {
		kind   string // overwrite, write, view, short (WriteFrom with less than the region)
		off, n int64
	}
	for _, tc := range []struct {
		name    string
		off, n  int64 // the region, relative to a block-aligned base
		ops     []op
		keepPre bool // KeepPreRun and KeepPreRunPattern after the fill
	}{
		{"overwritten whole in pieces", 0, 4 * block, nil, false},
		{"unaligned region", 64, 4*block - 128, []op{{"overwrite", 100, 5000}, {"view", block - 10, 20}}, false},
		{"partial lines", 0, 3 * block, []op{{"overwrite", 10, 100}, {"overwrite", block + 63, 2}, {"write", 2*block + 5, 7}}, false},
		{"a read in the middle", 0, 2 * block, []op{{"overwrite", 0, 4096}, {"view", 4096, 1}, {"overwrite", 8192, 4096}}, false},
		{"a short copy", 0, 2 * block, []op{{"short", 64, 4096}}, false},
		{"pre-run kept", 64, 3 * block, []op{{"overwrite", 4096, 4096}, {"write", block, 3}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMachine(t, testParams())
			mem := m.PE(0).HBM
			mem.Reserve(8 * block)
			base, err := mem.Alloc(6 * block)
			if err != nil {
				t.Fatal(err)
			}
			r := Region{Mem: mem, Off: base + tc.off, N: tc.n}
			model := make([]byte, tc.n)
			for i := range model {
				model[i] = byte(pattern >> (8 * (i % 8)))
			}
			r.FillPattern(pattern)
			if mem.lazyBlocks == 0 {
				t.Fatal("no block left pending: the fill wrote them all")
			}
			if tc.keepPre {
				m.KeepPreRun()
				r.KeepPreRunPattern()
			}
			rng := rand.New(rand.NewPCG(1, 2))
			write := func(o op) {
				src := make([]byte, o.n)
				for i := range src {
					src[i] = byte(rng.IntN(250) + 1)
				}
				sub := r.Sub(o.off, o.n)
				switch o.kind {
				case "overwrite":
					sub.WriteFrom(src)
				case "write":
					copy(sub.Bytes(), src)
				case "short":
					src = src[:o.n/2]
					sub.WriteFrom(src)
				}
				copy(model[o.off:], src)
			}
			for _, o := range tc.ops {
				if o.kind == "view" {
					if got, want := r.Sub(o.off, o.n).View(), model[o.off:o.off+o.n]; !bytes.Equal(got, want) {
						t.Fatalf("view [%d, %d): % x, want % x", o.off, o.off+o.n, got, want)
					}
					continue
				}
				write(o)
			}
			if tc.keepPre {
				pre := r.PreRun()
				for i := range pre {
					if want := byte(pattern >> (8 * (i % 8))); pre[i] != want {
						t.Fatalf("pre-run byte %d is %#x, want %#x", i, pre[i], want)
					}
				}
			}
			if len(tc.ops) == 0 {
				// Every block in 4 KiB pieces: all done without a fill.
				for off := int64(0); off < tc.n; off += 4096 {
					write(op{"overwrite", off, 4096})
				}
				if mem.lazyBlocks != 0 {
					t.Errorf("%d blocks still pending after being overwritten whole", mem.lazyBlocks)
				}
			}
			ov := m.PreRunOverlay() // writes what is pending: the live bytes whole
			got := ov.Mems[mem.ID].Live[r.Off : r.Off+r.N]
			if i := firstDiff(got, model); i >= 0 {
				t.Errorf("byte %d of the region is %#x, want %#x", i, got[i], model[i])
			}
			if mem.lazyBlocks != 0 {
				t.Errorf("%d blocks pending after the overlay", mem.lazyBlocks)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// An allocation over pending blocks (the region freed and allocated
// again) reads as zeros, as over written ones; Snapshot writes what is
// pending.
func TestFillPatternThenFreeAllocSnapshot(t *testing.T) {
	const block = 1 << preRunBlockShift
	m := newTestMachine(t, testParams())
	mem := m.PE(0).HBM
	mem.Reserve(4 * block)
	off, err := mem.Alloc(4 * block)
	if err != nil {
		t.Fatal(err)
	}
	r := Region{Mem: mem, Off: off, N: 4 * block}
	r.FillPattern(0xA5A5A5A5A5A5A5A5)
	snap := mem.Snapshot()[off : off+4*block]
	if i := firstDiff(snap, bytes.Repeat([]byte{0xA5}, len(snap))); i >= 0 {
		t.Fatalf("snapshot byte %d is %#x, not the pattern", i, snap[i])
	}
	r.FillPattern(0x0102030405060708)
	mem.Free(off+block, block)
	if o, err := mem.Alloc(block); err != nil || o != off+block {
		t.Fatalf("Alloc: %d, %v", o, err)
	}
	got := r.View()
	for i := range got {
		want := byte(0)
		if i < block || i >= 2*block {
			want = byte(uint64(0x0102030405060708) >> (8 * (i % 8)))
		}
		if got[i] != want {
			t.Fatalf("byte %d is %#x, want %#x", i, got[i], want)
		}
	}
}
