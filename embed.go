// Package kernbench holds the files shipped inside the binary: the default
// ccl.yaml, the algorithms and their helpers, and the host benches, so that
// `kernbench` works from any directory.
package kernbench

import "embed"

// Files is the embedded copy of ccl.yaml, algorithms/ and benches/.
//
//go:embed ccl.yaml algorithms benches
var Files embed.FS
