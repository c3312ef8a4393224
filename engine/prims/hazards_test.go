package prims

import (
	"errors"
	"testing"

	"kernbench/engine/machine"
)

// The hazards' errors name the call, the rank, the range and the
// operation raced with, and what to call first; none when nothing races.
func TestHazardErrors(t *testing.T) {
	m := newMachine(t, 1)
	pe := m.Ranks[0]
	reg := machine.Region{Mem: pe.TCM, Off: 0, N: 64}
	var ws Writes
	store := m.Store(pe, reg, nil)
	ws.Note("tl.store", store, site(3), false, nil)
	var async Writes
	waited := false
	copyOp := m.Store(pe, reg, nil)
	async.Note("tl.copy_async", copyOp, site(4), false, nil)
	async.Attach(copyOp, &waited)
	q := &machine.QueuePair{Dir: "E", Rank: 0}
	blocking := IssuingSends{{Q: q, Blocking: true, Origin: "k.star:5:1", Unissued: reg}}
	sendAsync := IssuingSends{{Q: q, Origin: "k.star:6:1", Unissued: reg}}
	elsewhere := machine.Region{Mem: pe.TCM, Off: 128, N: 8}
	part := machine.Region{Mem: pe.TCM, Off: 8, N: 8}
	tests := []struct {
		name     string
		err      error
		wantKind string
		want     string
	}{
		{"a write over a pending store", ws.WriteHazard("tl.copy", 0, part, nil), KindWriteWriteHazard,
			"WriteWriteHazard: tl.copy: rank 0 writes " + part.String() + " while the tl.store issued at kernel.star:3 still writes " + reg.String() + " (tl.flush() first, or write elsewhere)"},
		{"a write over a pending copy_async", async.WriteHazard("tl.store", 0, part, nil), KindWriteWriteHazard,
			"WriteWriteHazard: tl.store: rank 0 writes " + part.String() + " while the tl.copy_async issued at kernel.star:4 still writes " + reg.String() + " (tl.wait(its handle) first, or write elsewhere)"},
		{"a write elsewhere", ws.WriteHazard("tl.copy", 0, elsewhere, nil), "", ""},
		{"a read of a plain store's range", ws.ReadHazard("tl.fetch", 0, part, false), "", ""},
		{"a read of a copy_async's range", async.ReadHazard("tl.fetch", 0, part, false), KindPendingStoreHazard,
			"PendingStoreHazard: tl.fetch: rank 0 reads " + part.String() + " while the tl.copy_async issued at kernel.star:4 still writes " + reg.String() + " (tl.wait(its handle) first)"},
		{"a write over another thread's tl.send", blocking.WriteHazard("tl.store", 0, part), KindSendBufferHazard,
			"SendBufferHazard: tl.store: rank 0 writes " + part.String() + ` while the tl.send("E") at k.star:5:1, in another thread, still reads it (order the write after the send and a tl.flush("E"), e.g. with tl.event, or write elsewhere)`},
		{"a write over a tl.send_async not sent", sendAsync.WriteHazard("tl.store", 0, part), KindSendBufferHazard,
			"SendBufferHazard: tl.store: rank 0 writes " + part.String() + ` while the tl.send_async("E") issued at k.star:6:1 has not sent it yet (tl.wait(its handle) returns once all of it is issued, tl.flush("E") once it is delivered and the source is free; or write elsewhere)`},
		{"a write beside the sends", sendAsync.WriteHazard("tl.store", 0, elsewhere), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantKind == "" {
				if tt.err != nil {
					t.Fatalf("got %v, want no hazard", tt.err)
				}
				return
			}
			var pe *Error
			if !errors.As(tt.err, &pe) || pe.Kind != tt.wantKind || tt.err.Error() != tt.want {
				t.Errorf("got %v\nwant %s", tt.err, tt.want)
			}
		})
	}
}

// A side in use by another thread, and a write into another thread's
// local operand, name both threads and positions.
func TestThreadHazardErrors(t *testing.T) {
	mem := newMachine(t, 1).Ranks[0].TCM
	q := &machine.QueuePair{Dir: "W"}
	var sides Sides
	release, _ := sides.Use(q, false, "thread 1", "tl.recv_copy", "k.star:4:3")
	defer release()
	_, u := sides.Use(q, false, "kernel", "tl.recv", "k.star:9:5")
	var reads OperandReads
	done := reads.Add("thread 1", machine.Region{Mem: mem, Off: 0, N: 64}, "tl.recv_reduce_send", "k.star:5:3")
	defer done()
	r := reads.Conflict("kernel", machine.Region{Mem: mem, Off: 8, N: 8})
	if u == nil || r == nil {
		t.Fatalf("no conflict found: side %v, operand %v", u, r)
	}
	tests := []struct {
		name     string
		err      error
		wantKind string
		want     string
	}{
		{"receive side in use", u.InUseError(2, "kernel", q, false, "tl.recv", "k.star:9:5", "thread 1"), KindDirectionInUse,
			"DirectionInUse: rank 2 kernel: tl.recv at k.star:9:5 uses the receive side of W while thread 1's tl.recv_copy at k.star:4:3 is using it (one thread per direction side at a time)"},
		{"send side in use", u.InUseError(2, "kernel", q, true, "tl.send", "k.star:9:5", "thread 1"), KindDirectionInUse,
			"DirectionInUse: rank 2 kernel: tl.send at k.star:9:5 uses the send side of W while thread 1's tl.recv_copy at k.star:4:3 is using it (one thread per direction side at a time)"},
		{"local operand written", r.HazardError("tl.store", 2, "kernel", machine.Region{Mem: mem, Off: 8, N: 8}, "thread 1"), KindLocalOperandHazard,
			"LocalOperandHazard: tl.store: rank 2 kernel writes " + machine.Region{Mem: mem, Off: 8, N: 8}.String() + " while thread 1's tl.recv_reduce_send at k.star:5:3 still reads it as its local operand"},
	}
	for _, tt := range tests {
		var pe *Error
		if !errors.As(tt.err, &pe) || pe.Kind != tt.wantKind || tt.err.Error() != tt.want {
			t.Errorf("%s: got %v\nwant %s", tt.name, tt.err, tt.want)
		}
	}
}
