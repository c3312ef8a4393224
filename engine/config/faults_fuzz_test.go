package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// faultErrors flattens ParseFaults' error into its *Error values (the
// line saying decoding stopped left out) and reports whether that line
// was there.
func faultErrors(t *testing.T, err error) (lines []string, stopped bool) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is %T, want *Error or Errors", err, err)
		}
		es = Errors{e}
	}
	for _, e := range es {
		if e.Pos == "--fault" && strings.HasPrefix(e.Msg, "more errors may follow") {
			stopped = true
			continue
		}
		lines = append(lines, e.Error())
	}
	return lines, stopped
}

// formatFault writes f back as a --fault item.
func formatFault(f Fault) string {
	var kv []string
	if f.Link != "" {
		kv = append(kv, "link="+f.Link)
	} else {
		kv = append(kv, "pe="+strconv.Itoa(f.PE))
	}
	for _, n := range []struct {
		key string
		v   float64
	}{{"bandwidth_factor", f.BandwidthFactor}, {"latency_ns", f.LatencyNs}, {"slowdown", f.Slowdown}, {"jitter_ns", f.JitterNs}} {
		if n.v != 0 {
			kv = append(kv, n.key+"="+strconv.FormatFloat(n.v, 'f', -1, 64))
		}
	}
	if f.Seed != 0 {
		kv = append(kv, "seed="+strconv.FormatUint(f.Seed, 10))
	}
	if f.StopAtNs >= 0 {
		kv = append(kv, "stop_at_ns="+strconv.FormatFloat(f.StopAtNs, 'f', -1, 64))
	}
	return strings.Join(kv, ",")
}

// FuzzParseFaults: --fault items (here one a line) give either one fault
// per item, each a link or a PE that formats back to an item parsing to
// the same fault, or an error at the items: every line "--fault ITEM: …",
// the lines of the items together being those of each item alone, in
// order (up to the bound on errors, after which a line says decoding
// stopped).
func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{
		"link=ucie c0->c1,bandwidth_factor=0.5",
		"link=ucie c0->c1,bandwidth_factor=0.5,latency_ns=20\npe=3,slowdown=2",
		"link=pcie s0->host,jitter_ns=40,seed=7",
		"link=ucie c1->c0,stop_at_ns=5000",
		"pe=3,slowdown=2,stop_at_ns=0",
		"link=ucie c0->c1 bandwidth_factor=0.5",
		"pe=3;slowdown=2",
		"link=ucie c0->c1,bandwidth_factor=half",
		"pe=2,slowdown\npe=2,speed=3\nlink=ucie c0->c1",
		"pe=1,pe=2,slowdown=2",
		"link=1,latency_ns=1e3",
		// More than maxErrors mistakes: the items after them used to get
		// "give exactly one of link and pe", valid ones included.
		"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u\nlink=ucie c0->c1,bandwidth_factor=x\npe=2,slowdown=2",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items := strings.Split(s, "\n")
		got, err := ParseFaults(items)
		var alone []string
		for _, item := range items {
			one, err := ParseFaults([]string{item})
			if err != nil {
				lines, _ := faultErrors(t, err)
				if len(lines) == 0 {
					t.Fatalf("--fault %q: an error without a line at the item: %v", item, err)
				}
				for _, l := range lines {
					if !strings.HasPrefix(l, "--fault "+item+": ") {
						t.Fatalf("--fault %q: error %q is not at the item", item, l)
					}
				}
				alone = append(alone, lines...)
				continue
			}
			if len(one) != 1 {
				t.Fatalf("--fault %q: %d faults", item, len(one))
			}
			fl := one[0]
			if (fl.Link != "") == (fl.PE >= 0) || fl.Pos != "--fault "+item {
				t.Fatalf("--fault %q: bad fault %+v", item, fl)
			}
			again := formatFault(fl)
			back, err := ParseFaults([]string{again})
			if err != nil {
				t.Fatalf("--fault %q read as %+v, written back as %q: %v", item, fl, again, err)
			}
			back[0].Pos = fl.Pos
			if diff := cmp.Diff(fl, back[0]); diff != "" {
				t.Fatalf("--fault %q written back as %q (-first +again):\n%s", item, again, diff)
			}
		}
		if err == nil {
			if len(alone) > 0 || len(got) != len(items) {
				t.Fatalf("%q: %d faults, errors of the items alone %q", items, len(got), alone)
			}
			return
		}
		if got != nil {
			t.Fatal("ParseFaults returned both faults and an error")
		}
		lines, stopped := faultErrors(t, err)
		if len(lines) == 0 || len(lines) > len(alone) || !cmp.Equal(lines, alone[:len(lines)]) {
			t.Fatalf("%q: errors\n%s\nwant (those of the items alone)\n%s", items, strings.Join(lines, "\n"), strings.Join(alone, "\n"))
		}
		if len(lines) < len(alone) && !stopped {
			t.Fatalf("%q: %d of %d errors, without the line saying decoding stopped", items, len(lines), len(alone))
		}
	})
}
