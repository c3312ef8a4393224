package tl

import (
	"fmt"
	"testing"

	"go.starlark.net/starlark"
)

// A fused primitive's own unpacking of plain arguments fills what
// UnpackArgs fills, and it leaves to UnpackArgs every call UnpackArgs
// rejects (so the errors stay UnpackArgs' own).
func TestFusedSig_UnpacksLikeUnpackArgs(t *testing.T) {
	ptr := &Ptr{}
	s := func(v string) starlark.Value { return starlark.String(v) }
	kw := func(pairs ...any) []starlark.Tuple {
		var out []starlark.Tuple
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, starlark.Tuple{starlark.String(pairs[i].(string)), pairs[i+1].(starlark.Value)})
		}
		return out
	}
	calls := []struct {
		args starlark.Tuple
		kw   []starlark.Tuple
	}{
		{starlark.Tuple{s("W"), ptr, s("E")}, nil},
		{starlark.Tuple{s("W"), ptr, ptr, s("E")}, nil},
		{starlark.Tuple{s("W"), ptr}, kw("out_dir", s("E"), "piece_bytes", starlark.MakeInt(4096), "prefetch", ptr)},
		{starlark.Tuple{s("W")}, kw("local", ptr, "dst", ptr, "out_dir", s("E"), "final", starlark.True)},
		{nil, kw("in_dir", s("W"), "dst", ptr, "prefetch", starlark.None, "piece_bytes", starlark.None)},
		{starlark.Tuple{s("W"), ptr, ptr, s("E"), starlark.False, starlark.MakeInt(1024), ptr}, nil},
		{starlark.Tuple{s("W"), ptr, ptr, s("E"), starlark.False, starlark.MakeInt(1024), ptr, ptr}, nil}, // too many
		{starlark.Tuple{starlark.MakeInt(1), ptr, s("E")}, nil},                                           // in_dir not a string
		{starlark.Tuple{s("W"), ptr}, kw("out_dir", starlark.None)},                                       // out_dir not a string
		{starlark.Tuple{s("W"), ptr, ptr}, kw("final", starlark.None)},                                    // final not a bool
		{starlark.Tuple{s("W"), ptr, s("E")}, kw("in_dir", s("W"))},                                       // given twice
		{starlark.Tuple{s("W"), ptr, s("E")}, kw("piece_bytes", starlark.None, "piece_bytes", starlark.None)},
		{starlark.Tuple{s("W"), ptr, s("E")}, kw("peice_bytes", starlark.MakeInt(1))}, // unknown
		{starlark.Tuple{s("W")}, nil}, // missing
		{nil, kw("out_dir", s("E"))},  // missing in_dir
		{starlark.Tuple{}, kw()},      // nothing
		{starlark.Tuple{s("W"), ptr}, kw("dst", ptr, "final", starlark.True)},
	}
	for _, spec := range []primitiveSpec{
		{local: true, out: true}, {local: true, dst: true, finalParam: true}, {local: true, dst: true, out: true, finalParam: true},
		{dst: true}, {dst: true, out: true},
	} {
		sig := spec.signature()
		for i, c := range calls {
			t.Run(fmt.Sprintf("%+v/%d", spec, i), func(t *testing.T) {
				var want fusedArgs
				want.pieceV = starlark.None
				err := starlark.UnpackArgs("tl.fused", c.args, c.kw, spec.unpackPairs(nil, &want)...)

				got := fusedArgs{pieceV: starlark.None}
				ok := sig.unpack(&got, c.args, c.kw)
				if ok && err != nil {
					t.Fatalf("unpacked a call UnpackArgs rejects (%v)", err)
				}
				if ok && got != want {
					t.Fatalf("unpacked %+v, UnpackArgs %+v", got, want)
				}
				if !ok && err == nil && i < 6 {
					t.Fatalf("left a plain call to UnpackArgs")
				}
			})
		}
	}
}
