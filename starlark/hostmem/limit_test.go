package hostmem

import (
	"io/fs"
	"testing"
)

func TestAvailableMemory(t *testing.T) {
	const meminfo = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n"
	const busy = "MemTotal:       16000000 kB\nMemFree:          100000 kB\nMemAvailable:    2000000 kB\n"
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if s, ok := m[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"meminfo only: MemTotal", map[string]string{"/proc/meminfo": meminfo}, 16000000 * 1024},
		// Other processes took memory: MemAvailable fell, the default
		// did not move.
		{"MemAvailable ignored", map[string]string{"/proc/meminfo": busy}, 16000000 * 1024},
		{"cgroup v2 limit below", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30},
		{"cgroup v2 without limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 16000000 * 1024},
		{"cgroup v1 limit below", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
		{"cgroup v1 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 16000000 * 1024},
		{"cgroup limit above the machine's memory", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "68719476736"}, 16000000 * 1024},
		{"cgroup limit between MemAvailable and MemTotal", map[string]string{"/proc/meminfo": busy, "/sys/fs/cgroup/memory.max": "10240000000"}, 10240000000},
		{"old kernel: MemTotal", map[string]string{"/proc/meminfo": "MemTotal:       4000000 kB\n"}, 4000000 * 1024},
		{"nothing known", map[string]string{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := availableMemory(files(tt.files)); got != tt.want {
				t.Errorf("availableMemory = %d, want %d", got, tt.want)
			}
		})
	}
}

// The default --max-memory is at most half the address space an
// RLIMIT_AS leaves (room), and the memory figure when there is no limit.
func TestDefaultUnderAddressSpace(t *testing.T) {
	for _, c := range []struct {
		name        string
		limit, room int64
		want        int64
		fromAS      bool
	}{
		{"no address-space limit", 8 << 30, 0, 8 << 30, false},
		{"the limit leaves more than twice the memory", 8 << 30, 32 << 30, 8 << 30, false},
		{"ulimit -v 3G leaves 1.5 GiB", 16 << 30, 1536 << 20, 768 << 20, true},
		{"no memory figure", 0, 4 << 30, 2 << 30, true},
		{"nothing left", 16 << 30, 1, 1, true},
	} {
		got, fromAS := underAddressSpace(c.limit, c.room)
		if got != c.want || fromAS != c.fromAS {
			t.Errorf("%s: underAddressSpace(%d, %d) = %d, %v; want %d, %v", c.name, c.limit, c.room, got, fromAS, c.want, c.fromAS)
		}
	}
}
