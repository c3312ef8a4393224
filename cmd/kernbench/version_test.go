package main

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// kernbench version names the module version, and the revision when the
// build recorded one.
func TestVersionText(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "kernbench (devel)\ngo go1.x\ngo.starlark.net unknown\n"},
		{"release", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Deps: []*debug.Module{{Path: "go.starlark.net", Version: "v0.1"}}},
			"kernbench v1.2.3\ngo go1.x\ngo.starlark.net v0.1\n"},
		{"checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T21:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"kernbench (devel) (revision 0123456789ab, 2026-12-01T21:00:00Z, modified)\ngo go1.x\ngo.starlark.net unknown\n"},
	} {
		if diff := cmp.Diff(tc.want, versionText(tc.bi, "go1.x")); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
