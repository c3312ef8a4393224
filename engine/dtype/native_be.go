//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package dtype

// nativeLE is false on big-endian (or unlisted) hosts: every element goes
// through the portable little-endian decoding.
const nativeLE = false
