package script

import (
	"strings"

	"go.starlark.net/starlark"
)

// FailError is the error of a script's own fail(...): a failure the script
// meant (a neighbors() refusing a world size, an assertion), told from a
// mistake by type (errors.As) rather than by its "fail: " text.
type FailError struct{ msg string }

func (e *FailError) Error() string { return e.msg }

// failBuiltin is go.starlark.net's fail with a typed error: the same
// arguments (values joined by sep, strings unquoted) and the same text.
var failBuiltin = starlark.NewBuiltin("fail", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	if err := starlark.UnpackArgs("fail", nil, kwargs, "sep?", &sep); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("fail: ")
	for i, v := range args {
		if i > 0 {
			b.WriteString(sep)
		}
		if s, ok := starlark.AsString(v); ok {
			b.WriteString(s)
		} else {
			b.WriteString(v.String())
		}
	}
	return nil, &FailError{b.String()}
})
