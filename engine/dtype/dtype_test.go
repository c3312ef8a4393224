package dtype

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want DType
	}{
		{"f32", F32}, {"f16", F16}, {"bf16", BF16}, {"f64", F64},
		{"i32", I32}, {"i64", I64}, {"u8", U8},
		{"float32", F32}, {"float16", F16}, {"bfloat16", BF16}, {"float64", F64},
		{"int32", I32}, {"int64", I64}, {"uint8", U8},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "F32", "fp32", "int8", "f32 "} {
		_, err := Parse(bad)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error", bad)
			continue
		}
		for _, name := range []string{"f32", "bf16", "u8", "bfloat16", "uint8"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("Parse(%q) error %q does not list %q", bad, err, name)
			}
		}
	}
}

func TestDTypeProperties(t *testing.T) {
	type props struct {
		Name  string
		Size  int
		Float bool
	}
	var got []props
	for _, d := range All() {
		got = append(got, props{d.String(), d.Size(), d.IsFloat()})
		if back, err := Parse(d.String()); err != nil || back != d {
			t.Errorf("Parse(%v.String()) = %v, %v", d, back, err)
		}
	}
	want := []props{
		{"f32", 4, true}, {"f16", 2, true}, {"bf16", 2, true}, {"f64", 8, true},
		{"i32", 4, false}, {"i64", 8, false}, {"u8", 1, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("All() properties (-want +got):\n%s", diff)
	}
	for _, d := range []DType{0, U8 + 1, 255} {
		if d.Valid() || d.Size() != 0 || d.IsFloat() || !strings.HasPrefix(d.String(), "dtype(") {
			t.Errorf("invalid %d: Valid %v Size %d IsFloat %v String %q", uint8(d), d.Valid(), d.Size(), d.IsFloat(), d)
		}
	}
}

func TestRedOps(t *testing.T) {
	tests := []struct {
		name string
		r    RedOp
		pair Op
	}{
		{"sum", Sum, Add}, {"prod", Prod, Mul}, {"max", RMax, Max}, {"min", RMin, Min}, {"avg", Avg, Add},
	}
	for _, tt := range tests {
		r, err := ParseRedOp(tt.name)
		if err != nil || r != tt.r {
			t.Errorf("ParseRedOp(%q) = %v, %v; want %v", tt.name, r, err, tt.r)
		}
		if r.String() != tt.name {
			t.Errorf("%v.String() = %q, want %q", tt.r, r.String(), tt.name)
		}
		if got := r.Pairwise(); got != tt.pair {
			t.Errorf("%v.Pairwise() = %v, want %v", r, got, tt.pair)
		}
	}
	_, err := ParseRedOp("mean")
	if err == nil || !strings.Contains(err.Error(), "sum, prod, max, min, avg") {
		t.Errorf("ParseRedOp(mean) error = %v, want one listing the reductions", err)
	}
	if s := RedOp(0).String(); s != "redop(0)" {
		t.Errorf("RedOp(0).String() = %q", s)
	}
	mustPanic(t, "Pairwise of invalid", func() { RedOp(9).Pairwise() })
}

func TestOps(t *testing.T) {
	var got []string
	for op := Add; op <= Min; op++ {
		got = append(got, op.String())
		if back, err := ParseOp(op.String()); err != nil || back != op {
			t.Errorf("ParseOp(%q) = %v, %v", op, back, err)
		}
	}
	if diff := cmp.Diff([]string{"add", "sub", "mul", "div", "max", "min"}, got); diff != "" {
		t.Errorf("op names (-want +got):\n%s", diff)
	}
	if _, err := ParseOp("pow"); err == nil || !strings.Contains(err.Error(), "add, sub, mul, div, max, min") {
		t.Errorf("ParseOp(pow) error = %v", err)
	}
}

// mustPanic fails t unless f panics with a message containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one containing %q", want)
			return
		}
		if msg, ok := r.(string); ok && !strings.Contains(msg, want) {
			t.Errorf("panic %q, want one containing %q", msg, want)
		}
	}()
	f()
}

// NCCL's type names (float, half, double) and other common spellings are
// not accepted (a type has one short and one long name) but the error
// names the type they mean: "want one of f32, ..." alone leaves a user of
// nccl-tests' -d float to guess.
func TestParseNamesTheTypeOfOtherSpellings(t *testing.T) {
	for in, want := range map[string]string{
		"float": "f32", "half": "f16", "double": "f64", "bfloat": "bf16",
		"F32": "f32", "fp32": "f32", "fp16": "f16", "BF16": "bf16", "fp64": "f64",
		"int": "i32", "Float32": "f32",
	} {
		_, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error", in)
			continue
		}
		if hint := "; did you mean " + want + "?"; !strings.HasSuffix(err.Error(), hint) {
			t.Errorf("Parse(%q) error %q does not end with %q", in, err, hint)
		}
	}
	for _, in := range []string{"int8", "complex", "f128"} {
		if _, err := Parse(in); err == nil || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("Parse(%q) error %v: want an error without a guess", in, err)
		}
	}
}

// An integer type holds its range (the checks of tl.full's value read
// it); a floating-point type has none.
func TestIntRange(t *testing.T) {
	type rng struct {
		Lo, Hi int64
		OK     bool
	}
	for _, tt := range []struct {
		d    DType
		want rng
	}{
		{I32, rng{math.MinInt32, math.MaxInt32, true}},
		{I64, rng{math.MinInt64, math.MaxInt64, true}},
		{U8, rng{0, 255, true}},
		{F32, rng{}}, {F16, rng{}}, {BF16, rng{}}, {F64, rng{}}, {DType(0), rng{}},
	} {
		lo, hi, ok := tt.d.IntRange()
		if diff := cmp.Diff(tt.want, rng{lo, hi, ok}); diff != "" {
			t.Errorf("%v.IntRange() (-want +got):\n%s", tt.d, diff)
		}
	}
}
