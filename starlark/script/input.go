package script

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"

	"kernbench/engine/config"
)

// DefaultMaxInputSize bounds every input file kernbench reads (scripts,
// test files, --config, merge reports): a script is kilobytes, and an
// unbounded read of a huge or endless file would exhaust memory instead of
// failing. MaxInputEnv overrides it.
const DefaultMaxInputSize = 16 << 20

// MaxInputEnv names the environment variable that overrides
// DefaultMaxInputSize: a size such as 64M.
const MaxInputEnv = "KERNBENCH_MAX_INPUT_SIZE"

// maxInputSize is DefaultMaxInputSize or the valid value of MaxInputEnv.
func (e Env) maxInputSize() (int64, error) {
	v := e.Var(MaxInputEnv)
	if v == "" {
		return DefaultMaxInputSize, nil
	}
	n, err := config.ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", MaxInputEnv, err)
	}
	return n, nil
}

// ReadInput reads an input file. Only a regular file (or a link to one) is
// read: a FIFO would block the open or the read for ever and a device such
// as /dev/zero never ends, so both are refused by what they are before they
// are opened. A file larger than the input size limit is refused too.
// Errors name the file as given; a missing file is fs.ErrNotExist. A
// relative name is read in e.Dir.
func (e Env) ReadInput(name string) ([]byte, error) {
	st, err := e.Stat(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open" // what the user asked for: "open x: no such file or directory"
		}
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): kernbench reads only regular files, so that a read always ends", name, fileKind(st.Mode()))
	}
	limit, err := e.maxInputSize()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge(name, limit)
	}
	f, err := os.Open(e.Path(name))
	if err != nil {
		return nil, e.UserError(err, name)
	}
	defer f.Close()
	// The file may have grown since Stat: read at most limit+1 bytes
	// (limit+1 would wrap at the largest limit, and read nothing).
	data, err := io.ReadAll(io.LimitReader(f, min(limit, math.MaxInt64-1)+1))
	if err != nil {
		return nil, e.UserError(err, name)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(name, limit)
	}
	return data, nil
}

func tooLarge(name string, limit int64) error {
	return fmt.Errorf("%s: larger than the input limit of %s bytes (set %s, like %s=64M, to read it)", name, strconv.FormatInt(limit, 10), MaxInputEnv, MaxInputEnv)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}

// isNotExist is errors.Is(err, fs.ErrNotExist).
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
