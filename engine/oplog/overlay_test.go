package oplog

import (
	"bytes"
	"slices"
	"testing"
)

// overlayShift makes 4-byte blocks: the scenario's memories span several.
const overlayShift = 2

// phase1Overlay plays phase 1 as engine/machine does with a
// copy-on-first-write image: before each write of a record, the blocks it
// writes are saved (Save) from the live memory; then the record applies to
// the live memory. It returns the overlay over phase 1's final memory.
func phase1Overlay(t *testing.T, initial Image, recs []*Record) *Overlay {
	t.Helper()
	live := initial.Clone()
	ov := &Overlay{BlockShift: overlayShift, Mems: make([]OverlayMem, len(live))}
	for i := range live {
		ov.Mems[i].Live = live[i]
	}
	for _, r := range recs {
		if writes := r.Dst != 0 && r.Name != "fetch" && r.Kind != KindMath && (r.Src != 0 || r.Data != nil || r.Name == "store" || r.Name == "alloc"); writes {
			m, off, err := ov.mem(r.Dst, r.NBytes)
			if err != nil {
				t.Fatal(err)
			}
			m.Save(off, off+r.NBytes, overlayShift)
		}
	}
	// The saves above are the blocks' pre-run bytes (nothing was written
	// yet), as saving each just before its first write would be.
	if err := Replay(&live, recs); err != nil {
		t.Fatal(err)
	}
	for i := range live {
		ov.Mems[i].Live = live[i]
	}
	return ov
}

// Rule (docs/architecture.md, Two-pass verification): phase 2 replays from
// the initial image and must end byte-identical to phase 1. A replay on the
// overlay gives phase 1's memory; it reads the blocks phase 1 never wrote
// (the two inputs) from the live memory, and never writes the live memory.
func TestOverlayReplayMatchesPhase1(t *testing.T) {
	initial, recs := scenario()
	ov := phase1Overlay(t, initial, recs)
	if ov.Mems[0].State[0] != Unheld || ov.Mems[0].State[1] != Unheld {
		t.Fatalf("the input blocks were saved, but phase 1 only reads them: held %v", ov.Mems[0].State)
	}
	live := Image{bytes.Clone(ov.Mems[0].Live), bytes.Clone(ov.Mems[1].Live)}
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	if m := ov.Compare(recs); m != nil {
		t.Errorf("Compare reported %v for a correct phase 1", m)
	}
	for i := range live {
		if !bytes.Equal(live[i], ov.Mems[i].Live) {
			t.Errorf("the replay wrote live memory %d: %v, was %v", i, ov.Mems[i].Live, live[i])
		}
	}
	if ov.Mems[0].State[0] != Unheld || ov.Mems[0].State[1] != Unheld {
		t.Errorf("the replay copied the input blocks it only reads: held %v", ov.Mems[0].State)
	}
}

// Rule (docs/architecture.md, Two-pass verification), copy-on-first-write
// image: a phase-1 write the op_log does not have saves its block, which the
// replay leaves at its pre-run bytes: a mismatch.
func TestOverlayCatchesUnloggedWrite(t *testing.T) {
	initial, recs := scenario()
	ov := phase1Overlay(t, initial, recs)
	m1 := &ov.Mems[1]
	m1.Save(4, 8, overlayShift) // as Memory.Bytes does before a write
	m1.Live[7] = 0xEE
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	m := ov.Compare(recs)
	if m == nil || m.Addr != addr(1, 7) || m.Want != 0xEE || m.Got != 0 {
		t.Fatalf("mismatch = %+v, want phase 1 byte 0xee against 0 at %#x", m, addr(1, 7))
	}
}

// The same for an unlogged write into a block that no record writes (one
// the replay would otherwise never look at).
func TestOverlayCatchesUnloggedWriteToUntouchedBlock(t *testing.T) {
	initial, recs := scenario()
	ov := phase1Overlay(t, initial, recs)
	m0 := &ov.Mems[0]
	m0.Save(0, 4, overlayShift)
	m0.Live[1] = 0x55
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	m := ov.Compare(recs)
	if m == nil || m.Addr != addr(0, 1) || m.Want != 0x55 {
		t.Fatalf("mismatch = %+v, want phase 1 byte 0x55 at %#x", m, addr(0, 1))
	}
}

// A logged write that phase 1 never applied: its block was never saved,
// so the replay copies it from the live memory before writing it, and it
// differs from the live memory.
func TestOverlayCatchesLoggedWriteNotApplied(t *testing.T) {
	initial, recs := scenario()
	var applied []*Record
	for _, r := range recs {
		if r.Name != "host_write" {
			applied = append(applied, r)
		}
	}
	ov := phase1Overlay(t, initial, applied)
	if len(ov.Mems[1].State) > 0 && ov.Mems[1].State[0] != Unheld {
		t.Fatal("setup: the host_write's block was saved")
	}
	before := bytes.Clone(ov.Mems[1].Live)
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	m := ov.Compare(recs)
	if m == nil || m.Addr != addr(1, 0) || m.Got != 9 || m.Want != 0 {
		t.Fatalf("mismatch = %+v, want phase 2 byte 9 against 0 at %#x", m, addr(1, 0))
	}
	if m.LastWriter == nil || m.LastWriter.Name != "host_write" {
		t.Errorf("last writer = %+v, want the host_write", m.LastWriter)
	}
	if !bytes.Equal(before, ov.Mems[1].Live) {
		t.Errorf("the replay wrote the live memory: %v, was %v", ov.Mems[1].Live, before)
	}
}

// A logged write past the end of a memory phase 1 never grew (or into a
// memory phase 1 never had) is checked against zeros.
func TestOverlayCatchesLoggedWritePastLiveMemory(t *testing.T) {
	initial, recs := scenario()
	ov := phase1Overlay(t, initial, recs)
	extra := []*Record{
		{Seq: 100, Kind: KindMemory, Name: "host_write", Dst: addr(1, 20), NBytes: 2, Data: []byte{0, 0}, TEnd: 90},
		{Seq: 101, Kind: KindMemory, Name: "host_write", Dst: addr(3, 2), NBytes: 1, Data: []byte{4}, TEnd: 91},
	}
	all := append(append([]*Record(nil), recs...), extra...)
	if err := ReplayOverlay(ov, all); err != nil {
		t.Fatal(err)
	}
	// The zeros written past memory 1's end match; the 4 in memory 3 does not.
	m := ov.Compare(all)
	if m == nil || m.Addr != addr(3, 2) || m.Got != 4 || m.Want != 0 {
		t.Fatalf("mismatch = %+v, want phase 2 byte 4 against 0 at %#x", m, addr(3, 2))
	}
}

// A read in the replay sees a block's pre-run bytes, whether phase 1 left
// it alone (live memory) or wrote it later (the saved copy).
func TestOverlayReadsPreRunBytes(t *testing.T) {
	initial := Image{{1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, 8)}
	recs := []*Record{
		{Seq: 0, Kind: KindMemory, Name: "copy", Src: addr(0, 0), Dst: addr(1, 0), NBytes: 4, TEnd: 10},
		{Seq: 1, Kind: KindMemory, Name: "copy", Src: addr(0, 4), Dst: addr(1, 4), NBytes: 4, TEnd: 10},
		{Seq: 2, Kind: KindMemory, Name: "host_write", Dst: addr(0, 0), NBytes: 4, Data: []byte{9, 9, 9, 9}, TEnd: 20},
	}
	ov := phase1Overlay(t, initial, recs)
	if ov.Mems[0].State[0] != HeldBytes || ov.Mems[0].State[1] != Unheld {
		t.Fatalf("setup: held %v, want block 0 only", ov.Mems[0].State)
	}
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := ov.read(addr(1, 0), 8); !bytes.Equal(got, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("replayed copies = %v, want the pre-run bytes 1..8", got)
	}
	if m := ov.Compare(recs); m != nil {
		t.Errorf("Compare reported %v for a correct phase 1", m)
	}
}

// patternShift makes 16-byte blocks, the smallest Save keeps as a pattern.
const patternShift = 4

// sentinelScenario is a receive buffer of 4 blocks (memory 1) that starts
// as an 8-byte sentinel and an input (memory 0) of random-looking bytes;
// the records copy the input over blocks 0, 1 and the first half of 2.
func sentinelScenario() (Image, []*Record) {
	input := make([]byte, 64)
	for i := range input {
		input[i] = byte(i*37 + 11)
	}
	sentinel := make([]byte, 64)
	for i := range sentinel {
		sentinel[i] = []byte{0, 0, 0xc0, 0x7f, 0xa5, 0xa5, 0xa5, 0x01}[i%8]
	}
	recs := []*Record{
		{Seq: 0, Kind: KindIPCQ, Name: "send", Src: addr(0, 0), Dst: addr(1, 0), NBytes: 24, TEnd: 10},
		{Seq: 1, Kind: KindIPCQ, Name: "send", Src: addr(0, 24), Dst: addr(1, 24), NBytes: 16, TEnd: 20},
		// Reads back what the first send wrote, then overwrites it.
		{Seq: 2, Kind: KindMemory, Name: "fetch", Src: addr(1, 8), NBytes: 16, TileOut: 1, TEnd: 30},
		{Seq: 3, Kind: KindMemory, Name: "store", Dst: addr(1, 0), NBytes: 16, TileA: 1, TEnd: 40},
	}
	return Image{input, sentinel}, recs
}

// Rule (docs/architecture.md, Two-pass verification): phase 2 starts from the
// initial image. A block whose pre-run bytes repeat every 8 bytes (a receive
// buffer's sentinel) is saved as its pattern, one that does not as a copy;
// the replay starts from either and ends as phase 1 did.
func TestOverlaySavesSentinelBlocksAsPattern(t *testing.T) {
	initial, recs := sentinelScenario()
	live := initial.Clone()
	ov := &Overlay{BlockShift: patternShift, Mems: []OverlayMem{{Live: live[0]}, {Live: live[1]}}}
	ov.Mems[1].Save(0, 40, patternShift)
	ov.Mems[0].Save(0, 16, patternShift) // as if phase 1 also wrote the input's first block
	if got := ov.Mems[1].State[:4]; !slices.Equal(got, []BlockState{HeldPattern, HeldPattern, HeldPattern, Unheld}) {
		t.Fatalf("sentinel blocks saved as %v, want three patterns", got)
	}
	if got := ov.Mems[0].State[0]; got != HeldBytes {
		t.Fatalf("input block saved as %v, want its bytes", got)
	}
	if err := Replay(&live, recs); err != nil {
		t.Fatal(err)
	}
	ov.Mems[0].Live, ov.Mems[1].Live = live[0], live[1]
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	if m := ov.Compare(recs); m != nil {
		t.Errorf("Compare reported %v for a correct phase 1", m)
	}
	// Every block the replay wrote was compared as it was last written
	// and let go; the input's saved block, which no record writes, stays
	// held for Compare.
	if got := ov.Mems[1].State[:4]; !slices.Equal(got, []BlockState{Unheld, Unheld, Unheld, Unheld}) {
		t.Errorf("after the replay the receive blocks are %v, want all let go", got)
	}
	if got := ov.Mems[0].State[0]; got != HeldBytes {
		t.Errorf("after the replay the saved input block is %v, want held", got)
	}
}

// Rule (docs/architecture.md, Two-pass verification): the final image must
// equal phase 1's. A phase-1 write the op_log does not have, into a block
// saved as a pattern, is reported at its first byte, against the pattern's
// byte there; so is a logged write phase 1 applied wrongly, at the same
// address a full image comparison gives.
func TestOverlayCatchesWritesIntoPatternBlocks(t *testing.T) {
	initial, recs := sentinelScenario()
	for _, tc := range []struct {
		name      string
		change    func(live []byte)
		at        uint64
		got, want byte
	}{
		// Block 3: no record writes it, so the replay leaves its pattern.
		{"unlogged", func(live []byte) { live[50] = 0x42 }, addr(1, 50), 0xc0, 0x42},
		// Byte 20 of block 1: the replay writes the input there.
		{"wrong value", func(live []byte) { live[20] ^= 0xff }, addr(1, 20), initial[0][20], initial[0][20] ^ 0xff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := initial.Clone()
			ov := &Overlay{BlockShift: patternShift, Mems: []OverlayMem{{Live: live[0]}, {Live: live[1]}}}
			ov.Mems[1].Save(0, 64, patternShift)
			if err := Replay(&live, recs); err != nil {
				t.Fatal(err)
			}
			tc.change(live[1])
			ov.Mems[0].Live, ov.Mems[1].Live = live[0], live[1]
			full := initial.Clone()
			if err := Replay(&full, recs); err != nil {
				t.Fatal(err)
			}
			fm := Compare(full, live, recs)
			if err := ReplayOverlay(ov, recs); err != nil {
				t.Fatal(err)
			}
			m := ov.Compare(recs)
			if m == nil || m.Addr != tc.at || m.Got != tc.got || m.Want != tc.want {
				t.Fatalf("mismatch = %+v, want phase 2 %#x against phase 1 %#x at %#x", m, tc.got, tc.want, tc.at)
			}
			if fm == nil || fm.Addr != m.Addr || fm.Got != m.Got || fm.Want != m.Want {
				t.Errorf("overlay reports %+v, a full image comparison %+v", m, fm)
			}
		})
	}
}

// Rule (docs/architecture.md, Two-pass verification): a fetched tile holds
// the bytes the fetch read. The replay keeps a fetched tile as a view of the
// block it read where no record writes that block before the tile is read;
// here a host write overwrites the block between the fetch and the store of
// its tile (as a ring's receive slot is refilled while the tile from its last
// message is still to be stored), so the tile must keep the bytes from before
// the write: a view would store the new ones, and phase 2 would differ from
// phase 1. A tile fetched from a block nobody writes again is read in place,
// and the replay matches too.
func TestOverlayFetchedTileKeepsItsBytes(t *testing.T) {
	initial := Image{{1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, 8)}
	recs := []*Record{
		// Block 0 of memory 0 becomes the replay's own buffer (written).
		{Seq: 0, Kind: KindMemory, Name: "host_write", Dst: addr(0, 0), NBytes: 4, Data: []byte{10, 20, 30, 40}, TEnd: 10},
		{Seq: 1, Kind: KindMemory, Name: "fetch", Src: addr(0, 0), NBytes: 4, TileOut: 1, TEnd: 20},
		{Seq: 2, Kind: KindMemory, Name: "fetch", Src: addr(0, 4), NBytes: 4, TileOut: 2, TEnd: 20},
		{Seq: 3, Kind: KindMemory, Name: "host_write", Dst: addr(0, 0), NBytes: 4, Data: []byte{9, 9, 9, 9}, TEnd: 30},
		{Seq: 4, Kind: KindMemory, Name: "store", Dst: addr(1, 0), NBytes: 4, TileA: 1, TEnd: 40},
		{Seq: 5, Kind: KindMemory, Name: "store", Dst: addr(1, 4), NBytes: 4, TileA: 2, TEnd: 40},
	}
	ov := phase1Overlay(t, initial, recs)
	if want := []byte{10, 20, 30, 40, 5, 6, 7, 8}; !bytes.Equal(ov.Mems[1].Live, want) {
		t.Fatalf("setup: phase 1 stored %v, want %v", ov.Mems[1].Live, want)
	}
	if err := ReplayOverlay(ov, recs); err != nil {
		t.Fatal(err)
	}
	if m := ov.Compare(recs); m != nil {
		t.Errorf("Compare reported %v for a correct phase 1", m)
	}
}
