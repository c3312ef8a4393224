package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Issue 12 (2): one-way maps get the receiving ends they imply; true
// conflicts are left for Validate to report.
func TestImplyReceiveEnds(t *testing.T) {
	tests := []struct {
		name         string
		maps         []map[string]int
		wantMaps     []map[string]int
		wantRecvOnly []map[string]bool
		wantValid    bool
	}{
		{
			name:         "skip ring",
			maps:         []map[string]int{{"E": 2}, {"E": 0}, {"E": 1}},
			wantMaps:     []map[string]int{{"E": 2, "W": 1}, {"E": 0, "W": 2}, {"E": 1, "W": 0}},
			wantRecvOnly: []map[string]bool{{"W": true}, {"W": true}, {"W": true}},
			wantValid:    true,
		},
		{
			name:         "both ends point at each other with E",
			maps:         []map[string]int{{"E": 1}, {"E": 0}},
			wantMaps:     []map[string]int{{"E": 1, "W": 1}, {"E": 0, "W": 0}},
			wantRecvOnly: []map[string]bool{{"W": true}, {"W": true}},
			wantValid:    true,
		},
		{
			name:         "channels and tree names",
			maps:         []map[string]int{{"N_1": 1}, {"child_left": 2}, {}},
			wantMaps:     []map[string]int{{"N_1": 1}, {"child_left": 2, "S_1": 0}, {"parent": 1}},
			wantRecvOnly: []map[string]bool{nil, {"S_1": true}, {"parent": true}},
			wantValid:    true,
		},
		{
			name:      "reverse name taken on the peer",
			maps:      []map[string]int{{"E": 1}, {"W": 2}, {"E": 1}},
			wantMaps:  []map[string]int{{"E": 1}, {"W": 2}, {"E": 1}},
			wantValid: false,
		},
		{
			name:      "two one-way links claim the same name",
			maps:      []map[string]int{{"E": 2}, {"E": 2}, {}},
			wantMaps:  []map[string]int{{"E": 2}, {"E": 2}, {}},
			wantValid: false,
		},
		{
			name:      "custom names have no implied end",
			maps:      []map[string]int{{"next": 1}, {"next": 0}},
			wantMaps:  []map[string]int{{"next": 1}, {"next": 0}},
			wantValid: true, // they pair with each other
		},
		{
			name:      "one-way custom name",
			maps:      []map[string]int{{"next": 1}, {"next": 2}, {"next": 0}},
			wantMaps:  []map[string]int{{"next": 1}, {"next": 2}, {"next": 0}},
			wantValid: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := &Topology{Name: "custom", Maps: tt.maps}
			ImplyReceiveEnds(topo)
			if diff := cmp.Diff(tt.wantMaps, topo.Maps); diff != "" {
				t.Errorf("maps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRecvOnly, topo.RecvOnly); diff != "" {
				t.Errorf("receive-only (-want +got):\n%s", diff)
			}
			_, err := Validate(topo)
			if (err == nil) != tt.wantValid {
				t.Errorf("Validate: %v, want valid %v", err, tt.wantValid)
			}
		})
	}
}
