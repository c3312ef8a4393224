//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package dtype

// nativeLE: this host stores numbers in memory as the simulated memory
// does (little-endian), so an aligned f32 buffer can be read in place as
// []float32 (see f32View).
const nativeLE = true
