package target

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
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// SetItem is one --set or --vary item.
type SetItem struct {
	Flag string   // "--set" or "--vary" ("" for run_kernel_in_mock's set= items)
	Item string   // key.path=value as given
	Path []string // the key path
}

func (it SetItem) String() string {
	if it.Flag == "" {
		// run_kernel_in_mock's set= list.
		return fmt.Sprintf("set item %q", it.Item)
	}
	return it.Flag + " " + it.Item
}

// Given is what of a run's options decides whether its --set and --vary
// items take effect and how a hint names a setting: the items, the flags
// that override keys, and whether they came from run_kernel_in_mock's
// keywords rather than flags.
type Given struct {
	Sets, Vary []string
	// Keywords: the options are run_kernel_in_mock's keywords, named as
	// the test wrote them (topology), not as flags (--topology).
	Keywords             bool
	WorldSize            int // 0 = configured
	Topology, Collective string
	Root                 int
	RootGiven            bool
	// Compared are the ccl.yaml algorithms of the comparison the run
	// belongs to.
	Compared []string
}

// Items are g's --set items then its --vary items, in the order they
// are applied.
func (g Given) Items() []SetItem {
	var out []SetItem
	add := func(flag string, items []string) {
		for _, item := range items {
			key, _, _ := strings.Cut(item, "=")
			out = append(out, SetItem{Flag: flag, Item: item, Path: strings.Split(strings.TrimSpace(key), ".")})
		}
	}
	if g.Keywords {
		add("", g.Sets)
	} else {
		add("--set", g.Sets)
	}
	add("--vary", g.Vary)
	return out
}

// AllSets is every key.path=value item of g, --set then --vary, as
// the configuration takes them: a --vary item labelled "--vary ITEM", so
// that its mistakes are named as the --vary they are.
func (g Given) AllSets() []string {
	if len(g.Vary) == 0 {
		return g.Sets
	}
	out := slices.Clone(g.Sets)
	for _, item := range g.Vary {
		out = append(out, "--vary "+item)
	}
	return out
}

// OptionName is how the user gave the option that flag sets: the flag
// itself, or run_kernel_in_mock's keyword of the same name (--world-size:
// world_size).
func (g Given) OptionName(flag string) string {
	if g.Keywords {
		return strings.ReplaceAll(strings.TrimPrefix(flag, "--"), "-", "_")
	}
	return flag
}

// hasPrefix reports whether path starts with prefix.
func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// RunOf says what a run uses of the configuration, for Ineffective.
type RunOf struct {
	// Algorithm is the ccl.yaml entry the run uses ("" for none: a file
	// without an entry, an L3 bench, an MSCCL schedule); Entry is it.
	Algorithm string
	Entry     *config.Algorithm
	// Known: Algorithm is what the run uses. Before a file is loaded it
	// may yet be a host bench, whose algorithm is defaults.algorithm.
	Known bool
	// What names the run for messages: the algorithm or the file.
	What string
	// Fixed are defaults keys the run takes from elsewhere, with why
	// (an MSCCL schedule fixes its world size).
	Fixed map[string]string
}

// Ineffective is the usage error of the first --set or --vary item of
// opts that cannot take effect in run r of configuration cfg: one that
// a later item replaces, one a flag overrides (--world-size over
// defaults.world_size), a defaults key the algorithm's entry sets for
// itself, defaults.algorithm when the run names its algorithm, and a key
// of an algorithm neither this run nor (opts.Compared) the comparison it
// belongs to runs.
func Ineffective(cfg *config.Config, r RunOf, opts Given) error {
	items := opts.Items()
	fail := func(it SetItem, format string, args ...any) error {
		return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%v cannot take effect: %s", it, fmt.Sprintf(format, args...))})
	}
	for i, it := range items {
		for _, later := range items[i+1:] {
			if !hasPrefix(it.Path, later.Path) {
				continue
			}
			if later.Flag == it.Flag {
				return fail(it, "%v, given after it, replaces it; give one of them", later)
			}
			return fail(it, "%v replaces it in every run of the comparison; give one of them", later)
		}
		p := it.Path
		switch {
		case len(p) == 2 && p[0] == "defaults" && p[1] == "algorithm":
			if r.Known && r.Algorithm != cfg.Defaults.Algorithm {
				return fail(it, "defaults.algorithm picks the algorithm of a run that names none, and this one runs %s; name the algorithms to run instead (kernbench run A B)", r.What)
			}
		case len(p) >= 2 && p[0] == "defaults":
			if why, ok := r.Fixed[p[1]]; ok {
				return fail(it, "%s", why)
			}
			if p[1] == "world_size" && opts.WorldSize > 0 {
				return fail(it, "%s %d overrides it; give one of them", opts.OptionName("--world-size"), opts.WorldSize)
			}
			if r.Entry != nil && slices.Contains(r.Entry.OverrideKeys, p[1]) {
				instead := fmt.Sprintf("algorithms.%s.%s", r.Algorithm, strings.Join(p[1:], "."))
				if it.Flag != "--vary" {
					_, value, _ := strings.Cut(it.Item, "=")
					instead += "=" + value
				}
				return fail(it, "algorithms.%s.%s (%s) overrides it for %s; %s %s instead",
					r.Algorithm, p[1], r.Entry.OverridePos[p[1]], r.Algorithm, it.FlagOr("--set"), instead)
			}
		case len(p) >= 2 && p[0] == "algorithms":
			if r.Known && p[1] != r.Algorithm && !slices.Contains(opts.Compared, p[1]) {
				runs := r.What
				if len(opts.Compared) > 0 {
					runs = strings.Join(opts.Compared, ", ")
				}
				return fail(it, "%s is not run (this run: %s)", p[1], runs)
			}
			if opts.RootGiven && (len(p) == 4 && p[2] == "params" && p[3] == "root" || len(p) == 3 && p[2] == "params") {
				return fail(it, "%s %d overrides the entry's params.root; give one of them", opts.OptionName("--root"), opts.Root)
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
				return fail(it, "%s %s overrides it; give one of them", opts.OptionName(flag), value)
			}
		}
	}
	return nil
}

// FlagOr is the item's flag, or def for a mock's set= item.
func (it SetItem) FlagOr(def string) string {
	if it.Flag == "" {
		return def
	}
	return it.Flag
}
