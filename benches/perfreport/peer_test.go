package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// peerOut64 is the peer's output for --ranks 64 --chunks 8 --slots 32
// (its columns as it prints them), with the row's bad count left to fill.
const peerOut64 = `simpy 3.0.8  python 3.11.7  S=67108864B C=8 slots=32 alpha=1000ns beta=10ps/B
    N   chunkB regime     T_sim_us   T_model_us match T/Thakur     events   wall_s      ev/s   checked bad stalls
   64   131072     bw     1322.206     1322.206  True   0.9136     193664     0.48    406513     32768 %s      0
`

func TestParsePeer(t *testing.T) {
	good := strings.Replace(peerOut64, "%s", "  0", 1)
	for _, tc := range []struct {
		name    string
		out     string
		n       int
		want    peerOutput
		wantErr string // a substring of the error; "" for none
	}{
		{name: "ok", out: good, n: 64, want: peerOutput{SimPy: "3.0.8", Python: "3.11.7", N: 64, ChunkBytes: 131072, TSimUS: 1322.206, Events: 193664, Checked: 32768}},
		{name: "SimPy 4", out: strings.Replace(good, "simpy 3.0.8  python 3.11.7", "simpy 4.1.2  python 3.12.3", 1), n: 64,
			want: peerOutput{SimPy: "4.1.2", Python: "3.12.3", N: 64, ChunkBytes: 131072, TSimUS: 1322.206, Events: 193664, Checked: 32768}},
		{name: "bad chunks", out: strings.Replace(peerOut64, "%s", "  3", 1), n: 64, wantErr: "3 chunks reduced wrong"},
		{name: "another N", out: good, n: 256, wantErr: "a row for N=64, want N=256"},
		{name: "incomplete", out: strings.Replace(good, "32768", "32767", 1), n: 64, wantErr: "32767 chunks checked, want 32768"},
		{name: "no versions", out: strings.Replace(good, "simpy 3.0.8  python 3.11.7", "S=1", 1), n: 64, wantErr: "first line"},
		{name: "no bad column", out: strings.Replace(strings.Replace(good, " bad ", " ok ", 1), "%s", "", 1), n: 64, wantErr: `no "bad" column`},
		{name: "no row", out: strings.Join(strings.Split(good, "\n")[:2], "\n"), n: 64, wantErr: "0 result rows"},
		{name: "stray line", out: good + "Traceback (most recent call last):\n", n: 64, wantErr: "unexpected line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePeer(tc.out, tc.n, 8)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parsePeer: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePeer: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsePeer (-want +got):\n%s", diff)
			}
		})
	}
}

// The peer's message count and the per-message figures: N·2(N−1)·8
// messages, as many as kernbench's ring sends at 4 KiB messages and
// N × 32 KiB per rank (its --json send counts at 64, 256 and 1024 ranks).
func TestPeerArithmetic(t *testing.T) {
	approx := cmpopts.EquateApprox(1e-12, 0)
	for _, tc := range []struct {
		n    int
		want int64
	}{{4, 192}, {64, 64512}, {256, 1044480}, {1024, 16760832}} {
		if got := peerMessages(tc.n, peerChunks); got != tc.want {
			t.Errorf("peerMessages(%d, %d) = %d, want %d", tc.n, peerChunks, got, tc.want)
		}
	}
	if diff := cmp.Diff([]string{"--ranks", "256", "--chunks", "8", "--slots", "32"}, peerArgs(256)); diff != "" {
		t.Errorf("peerArgs(256) (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		sec  float64
		msgs int64
		want float64
	}{
		{"64 ranks", 0.64512, 64512, 10},
		{"256 ranks", 0.52224, 1044480, 0.5},
		{"no messages", 3e-6, 0, 3},
	} {
		if diff := cmp.Diff(tc.want, usPerMessage(tc.sec, tc.msgs), approx); diff != "" {
			t.Errorf("%s: usPerMessage(%v, %d) (-want +got):\n%s", tc.name, tc.sec, tc.msgs, diff)
		}
	}

	// Pair by pair: the peer's CPU per message over kernbench's.
	peer := []float64{1.29024, 0.96768, 0.64512} // seconds
	kb := []float64{0.064512, 0.129024, 0.064512}
	got := pairRatios(peer, kb, 64512, 64512)
	if diff := cmp.Diff([]float64{20, 7.5, 10}, got, approx); diff != "" {
		t.Errorf("pairRatios (-want +got):\n%s", diff)
	}
	if m := medianFloat(got); cmp.Diff(10.0, m, approx) != "" {
		t.Errorf("medianFloat(%v) = %v, want 10", got, m)
	}
	if m := medianFloat([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("medianFloat(4 1 3 2) = %v, want 2.5", m)
	}
	if diff := cmp.Diff("10.00 (7.50–20.00)", ratioCell(got)); diff != "" {
		t.Errorf("ratioCell (-want +got):\n%s", diff)
	}
}
