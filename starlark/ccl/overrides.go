package ccl

// Settings given on the command line that cannot take effect. A --set or
// --vary item that something else overrides (the algorithm's own ccl.yaml
// entry, a flag, a later item) would leave the run as it was while the
// table says otherwise, so it is refused before anything runs, naming
// what overrides it.

import (
	"fmt"
	"slices"
	"strings"

	"kernbench/engine/config"
)

// setItem is one --set or --vary item.
type setItem struct {
	flag string   // "--set" or "--vary"
	item string   // key.path=value as given
	path []string // the key path
}

func (it setItem) String() string {
	if it.flag == "" {
		// run_kernel_in_mock's set= list.
		return fmt.Sprintf("set item %q", it.item)
	}
	return it.flag + " " + it.item
}

// setItems are opts' --set items then its --vary items, in the order they
// are applied.
func (o Options) setItems() []setItem {
	var out []setItem
	add := func(flag string, items []string) {
		for _, item := range items {
			key, _, _ := strings.Cut(item, "=")
			out = append(out, setItem{flag: flag, item: item, path: strings.Split(strings.TrimSpace(key), ".")})
		}
	}
	if o.Keywords {
		add("", o.Sets)
	} else {
		add("--set", o.Sets)
	}
	add("--vary", o.Vary)
	return out
}

// allSets is every key.path=value item of opts, --set then --vary, as
// the configuration takes them: a --vary item labelled "--vary ITEM", so
// that its mistakes are named as the --vary they are.
func (o Options) allSets() []string {
	if len(o.Vary) == 0 {
		return o.Sets
	}
	out := slices.Clone(o.Sets)
	for _, item := range o.Vary {
		out = append(out, "--vary "+item)
	}
	return out
}

// hasPrefix reports whether path starts with prefix.
func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// runOf says what a run uses of the configuration, for ineffectiveSet.
type runOf struct {
	// algorithm is the ccl.yaml entry the run uses ("" for none: a file
	// without an entry, an L3 bench, an MSCCL schedule); entry is it.
	algorithm string
	entry     *config.Algorithm
	// known: algorithm is what the run uses. Before a file is loaded it
	// may yet be a host bench, whose algorithm is defaults.algorithm.
	known bool
	// what names the run for messages: the algorithm or the file.
	what string
	// fixed are defaults keys the run takes from elsewhere, with why
	// (an MSCCL schedule fixes its world size).
	fixed map[string]string
}

// ineffectiveSet is the usage error of the first --set or --vary item of
// opts that cannot take effect in run r of configuration cfg: one that
// a later item replaces, one a flag overrides (--world-size over
// defaults.world_size), a defaults key the algorithm's entry sets for
// itself, defaults.algorithm when the run names its algorithm, and a key
// of an algorithm neither this run nor (opts.Compared) the comparison it
// belongs to runs.
func ineffectiveSet(cfg *config.Config, r runOf, opts Options) error {
	items := opts.setItems()
	fail := func(it setItem, format string, args ...any) error {
		return usage("%v cannot take effect: %s", it, fmt.Sprintf(format, args...))
	}
	for i, it := range items {
		for _, later := range items[i+1:] {
			if !hasPrefix(it.path, later.path) {
				continue
			}
			if later.flag == it.flag {
				return fail(it, "%v, given after it, replaces it; give one of them", later)
			}
			return fail(it, "%v replaces it in every run of the comparison; give one of them", later)
		}
		p := it.path
		switch {
		case len(p) == 2 && p[0] == "defaults" && p[1] == "algorithm":
			if r.known && r.algorithm != cfg.Defaults.Algorithm {
				return fail(it, "defaults.algorithm picks the algorithm of a run that names none, and this one runs %s; name the algorithms to run instead (kernbench run A B)", r.what)
			}
		case len(p) >= 2 && p[0] == "defaults":
			if why, ok := r.fixed[p[1]]; ok {
				return fail(it, "%s", why)
			}
			if p[1] == "world_size" && opts.WorldSize > 0 {
				return fail(it, "%s %d overrides it; give one of them", opts.optionName("--world-size"), opts.WorldSize)
			}
			if r.entry != nil && slices.Contains(r.entry.OverrideKeys, p[1]) {
				instead := fmt.Sprintf("algorithms.%s.%s", r.algorithm, strings.Join(p[1:], "."))
				if it.flag != "--vary" {
					_, value, _ := strings.Cut(it.item, "=")
					instead += "=" + value
				}
				return fail(it, "algorithms.%s.%s (%s) overrides it for %s; %s %s instead",
					r.algorithm, p[1], r.entry.OverridePos[p[1]], r.algorithm, it.flagOr("--set"), instead)
			}
		case len(p) >= 2 && p[0] == "algorithms":
			if r.known && p[1] != r.algorithm && !slices.Contains(opts.Compared, p[1]) {
				runs := r.what
				if len(opts.Compared) > 0 {
					runs = strings.Join(opts.Compared, ", ")
				}
				return fail(it, "%s is not run (this run: %s)", p[1], runs)
			}
			if opts.RootGiven && (len(p) == 4 && p[2] == "params" && p[3] == "root" || len(p) == 3 && p[2] == "params") {
				return fail(it, "%s %d overrides the entry's params.root; give one of them", opts.optionName("--root"), opts.Root)
			}
			if len(p) != 3 {
				break
			}
			flag, value := "", ""
			switch p[2] {
			case "world_size":
				if opts.WorldSize > 0 {
					flag, value = "--world-size", fmt.Sprint(opts.WorldSize)
				}
			case "topology":
				flag, value = "--topology", opts.Topology
			case "collective":
				flag, value = "--collective", opts.Collective
			}
			if value != "" {
				return fail(it, "%s %s overrides it; give one of them", opts.optionName(flag), value)
			}
		}
	}
	return nil
}

// flagOr is the item's flag, or def for a mock's set= item.
func (it setItem) flagOr(def string) string {
	if it.flag == "" {
		return def
	}
	return it.flag
}
