package prims

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// message is one message a recorder was asked to issue: its range (by
// offset and length), element count, the unissued rest it noted and the
// queue pair's Sending then.
type message struct {
	Off, N, Count, RestOff, RestN, Sending int64
}

type recorder struct{ got []message }

func (r *recorder) Message(_ *sim.Proc, q *machine.QueuePair, reg machine.Region, _ dtype.DType, count int64, _ any, _ *Send, rest machine.Region) error {
	r.got = append(r.got, message{reg.Off, reg.N, count, rest.Off, rest.N, q.Sending})
	return nil
}

// A buffer goes out as messages of at most a piece of whole elements; the
// rest noted with each is what is left after it; a raw view's bytes that
// fill no element travel last; the queue pair shows the size of a
// several-message send while it is sent.
func TestSendBuffer_Pieces(t *testing.T) {
	mem := &machine.Memory{}
	tests := []struct {
		name         string
		n, count     int64 // bytes and f32 elements of the source at 0
		piece        int64
		want         []message
		wantTooLarge bool
	}{
		{name: "empty", n: 0, count: 0, piece: 64, want: []message{{0, 0, 0, 0, 0, 0}}},
		{name: "one piece", n: 64, count: 16, piece: 64, want: []message{{0, 64, 16, 0, 0, 0}}},
		{name: "three pieces, the last shorter", n: 40, count: 10, piece: 16, want: []message{
			{0, 16, 4, 16, 24, 40}, {16, 16, 4, 32, 8, 40}, {32, 8, 2, 40, 0, 40}}},
		{name: "a piece not a whole number of elements", n: 24, count: 6, piece: 10, want: []message{
			{0, 8, 2, 8, 16, 24}, {8, 8, 2, 16, 8, 24}, {16, 8, 2, 24, 0, 24}}},
		{name: "raw bytes past the last element", n: 26, count: 6, piece: 16, want: []message{
			{0, 16, 4, 16, 10, 26}, {16, 8, 2, 24, 2, 26}, {24, 2, 0, 0, 0, 26}}},
		{name: "an element larger than a piece", n: 8, count: 2, piece: 2, wantTooLarge: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &machine.QueuePair{Dir: "E", Rank: 3}
			r := &recorder{}
			err := SendBuffer(r, nil, q, machine.Region{Mem: mem, Off: 0, N: tt.n}, dtype.F32, tt.count, tt.piece, nil, nil)
			var ie *machine.IPCQError
			if tt.wantTooLarge {
				if !errors.As(err, &ie) || ie.Kind != "IpcqMessageTooLarge" || ie.Error() != "IpcqMessageTooLarge: rank 3 send E: one f32 element (4 bytes) exceeds a message of 2 bytes" {
					t.Fatalf("got %v, want IpcqMessageTooLarge naming the element", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if q.Sending != 0 {
				t.Errorf("Sending = %d after the send", q.Sending)
			}
		})
	}
}
