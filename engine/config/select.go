package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"kernbench/engine/spelling"
)

// AutoAlgorithm is the algorithm name that runs, for each size, the
// algorithm select: records for the collective (kernbench tune writes
// it). It may be defaults.algorithm when select: is given, and no
// algorithms: entry may take the name.
const AutoAlgorithm = "auto"

// SelectRange is one entry of a select: list: buffers of MinBytes bytes
// per rank up to, not including, MaxBytes (0: no upper bound) run
// Algorithm with the Set items applied (--set key.path=value items, as
// the --vary of a tune that chose them).
type SelectRange struct {
	MinBytes  int64
	MaxBytes  int64 // exclusive; 0 = unbounded
	Algorithm string
	Set       []string
	// WorldSize, when not 0, is the world size the range was tuned at
	// (kernbench tune writes it): auto picks it only for that world
	// size, as NCCL's tuner decides per number of ranks.
	WorldSize int
	// Pos is where the entry was given ("FILE:LINE" or "--set ITEM").
	Pos string `json:"-"`
}

// Contains reports whether a buffer of n bytes falls in r.
func (r SelectRange) Contains(n int64) bool {
	return n >= r.MinBytes && (r.MaxBytes == 0 || n < r.MaxBytes)
}

// RangeString is r's range as messages write it: "[0, 32768)" or
// "[32768, ∞)".
func (r SelectRange) RangeString() string {
	if r.MaxBytes == 0 {
		return fmt.Sprintf("[%d, ∞)", r.MinBytes)
	}
	return fmt.Sprintf("[%d, %d)", r.MinBytes, r.MaxBytes)
}

// Pick is the entry of select: for collective whose range holds n bytes
// at world ranks: of the ranges tuned at that world size if there are
// some, else of those that name none; an error says which ranges there
// are when none does, or which world sizes the ranges were tuned at.
func (c *Config) Pick(collective string, n int64, world int) (SelectRange, error) {
	all, ok := c.Select[collective]
	if !ok {
		have := slices.Sorted(maps.Keys(c.Select))
		return SelectRange{}, fmt.Errorf("select: has no entry for %s (it has: %s); kernbench tune %s writes one", collective, knownList(have), collective)
	}
	ranges := rangesAt(all, world)
	if ranges == nil {
		ranges = rangesAt(all, 0)
	}
	if ranges == nil {
		var tuned []string
		for _, r := range all {
			if w := strconv.Itoa(r.WorldSize); !slices.Contains(tuned, w) {
				tuned = append(tuned, w)
			}
		}
		return SelectRange{}, fmt.Errorf("select.%s was tuned at world_size %s, not %d (%s): kernbench tune %s --world-size %d writes ranges for it (or leave world_size out of a range to use it at any)",
			collective, strings.Join(tuned, ", "), world, all[0].Pos, collective, world)
	}
	for _, r := range ranges {
		if r.Contains(n) {
			return r, nil
		}
	}
	var parts []string
	for _, r := range ranges {
		parts = append(parts, r.RangeString()+" "+r.Algorithm)
	}
	return SelectRange{}, fmt.Errorf("select.%s: no range holds %d bytes (ranges: %s)", collective, n, strings.Join(parts, ", "))
}

// rangesAt are the ranges of rs with world size w (0: those that name
// none), nil when there are none.
func rangesAt(rs []SelectRange, w int) []SelectRange {
	var out []SelectRange
	for _, r := range rs {
		if r.WorldSize == w {
			out = append(out, r)
		}
	}
	return out
}

// selectRule decodes select:, a mapping from a collective to its list
// of ranges; one field per collective, so that --set checks the path.
func selectRule(c *Config) *rule {
	fields := make([]field, len(collectives))
	for i, name := range collectives {
		fields[i] = field{key: name, rule: selectListLeaf(c, name)}
	}
	return &rule{fields: fields}
}

// selectListLeaf decodes the ranges of one collective: a non-empty list
// of disjoint ranges, in any order (kept sorted by min_bytes).
func selectListLeaf(c *Config, collective string) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		if isNull(n) {
			return nil
		}
		if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
			return d.errorf(n, "%s: got an empty list, want at least one range like {min_bytes: 0, algorithm: NAME} (or leave %s out)", path, collective)
		}
		if n.Kind != yaml.SequenceNode {
			return d.errorf(n, "%s: got %s, want a list of ranges like {min_bytes: 0, max_bytes: 32K, algorithm: NAME}", path, describe(n))
		}
		type entry struct {
			r    SelectRange
			n    *yaml.Node
			path string
		}
		var entries []entry
		for i, item := range n.Content {
			r := SelectRange{}
			itemPath := fmt.Sprintf("%s[%d]", path, i)
			before := len(d.errs)
			d.decode(selectRangeRule(&r), nil, item, itemPath)
			if len(d.errs) > before {
				continue
			}
			r.Pos = d.pos(item)
			if label, set := d.origin[item]; set {
				r.Pos = label
			}
			if r.MaxBytes != 0 && r.MaxBytes <= r.MinBytes {
				d.add(d.errorf(item, "%s: max_bytes %d is not above min_bytes %d", itemPath, r.MaxBytes, r.MinBytes))
				continue
			}
			entries = append(entries, entry{r, item, itemPath})
		}
		// In any order (the lists of a sharded tune's shards join by
		// concatenation), kept in increasing order of world size (none
		// first) and min_bytes: ranges of different world sizes may
		// overlap.
		slices.SortStableFunc(entries, func(a, b entry) int {
			return cmp.Or(cmp.Compare(a.r.WorldSize, b.r.WorldSize), cmp.Compare(a.r.MinBytes, b.r.MinBytes))
		})
		out := make([]SelectRange, 0, len(entries))
		var nodes []*yaml.Node
		var paths []string
		for _, e := range entries {
			if k := len(out); k > 0 && out[k-1].WorldSize == e.r.WorldSize {
				prev := out[k-1]
				switch {
				case prev.MaxBytes == 0:
					d.add(d.errorf(e.n, "%s: %s overlaps %s (%s), which has no max_bytes and holds every size from its min_bytes up", e.path, e.r.RangeString(), prev.RangeString(), prev.Pos))
					continue
				case e.r.MinBytes < prev.MaxBytes:
					d.add(d.errorf(e.n, "%s: %s overlaps %s (%s); ranges may not overlap", e.path, e.r.RangeString(), prev.RangeString(), prev.Pos))
					continue
				}
			}
			out = append(out, e.r)
			nodes = append(nodes, e.n)
			paths = append(paths, e.path)
		}
		if c.Select == nil {
			c.Select = make(map[string][]SelectRange)
		}
		c.Select[collective] = out
		d.selects = append(d.selects, selectNodes{collective, nodes, paths})
		return nil
	}}
}

// selectNodes are the nodes of one collective's ranges, for the checks
// against algorithms: once it is decoded.
type selectNodes struct {
	collective string
	nodes      []*yaml.Node
	paths      []string // select.COLLECTIVE[I] as the file numbers them
}

func selectRangeRule(r *SelectRange) *rule {
	return &rule{fields: []field{
		{key: "min_bytes", rule: &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" && n.Value == "0" {
				r.MinBytes = 0
				return nil
			}
			return sizeLeaf(&r.MinBytes).leaf(d, n, path)
		}}},
		{key: "max_bytes", rule: &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			if n.Kind == yaml.ScalarNode && n.Value == "0" {
				return d.errorf(n, "%s: got 0, want > 0 (leave max_bytes out for no upper bound)", path)
			}
			return sizeLeaf(&r.MaxBytes).leaf(d, n, path)
		}}},
		{key: "world_size", rule: intLeaf(&r.WorldSize, 1)},
		{key: "algorithm", required: true, rule: &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || !isIdent(n.Value) {
				return d.errorf(n, "%s: got %s, want the name of an algorithms: entry", path, describe(n))
			}
			if n.Value == AutoAlgorithm {
				return d.errorf(n, "%s: got auto, want the name of an algorithms: entry (auto is what picks from select:)", path)
			}
			r.Algorithm = n.Value
			return nil
		}}},
		{key: "set", rule: &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			if isNull(n) {
				return nil
			}
			if n.Kind != yaml.SequenceNode {
				return d.errorf(n, "%s: got %s, want a list of key.path=value items (as --set takes)", path, describe(n))
			}
			for i, e := range n.Content {
				at := fmt.Sprintf("%s[%d]", path, i)
				if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" {
					return d.errorf(e, "%s: got %s, want a key.path=value item (as --set takes)", at, describe(e))
				}
				key, _, ok := strings.Cut(e.Value, "=")
				key = strings.TrimSpace(key)
				switch {
				case !ok || key == "":
					return d.errorf(e, "%s: got %q, want key.path=value (as --set takes)", at, e.Value)
				case within(key, "select"):
					return d.errorf(e, "%s: %s: an entry of select: cannot set select:", at, key)
				case within(key, "defaults.algorithm"):
					return d.errorf(e, "%s: %s: the entry's algorithm: names what it runs", at, key)
				}
				// The key path is checked here, against the schema, so
				// that a mistake names this file and line; applied to a
				// scratch tree, the item changes nothing yet.
				scratch := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				shape := rootRule(&Config{Algorithms: make(map[string]*Algorithm)})
				if err := d.applySet(scratch, shape, e.Value); err != nil {
					msg := err.Error()
					if ce := (*Error)(nil); errors.As(err, &ce) {
						msg = ce.Msg
					}
					return d.errorf(e, "%s: %s", at, msg)
				}
				// So is the value, by the key's own rule: at run time
				// a bad one was blamed on a --vary nobody gave.
				if msg := checkSetValue(shape, scratch, key); msg != "" {
					return d.errorf(e, "%s: %s", at, msg)
				}
				r.Set = append(r.Set, e.Value)
			}
			return nil
		}}},
	}}
}

// checkSetValue decodes the value a set item put into tree (applySet) at
// key by the rule of that key under shape, with a decoder of its own, and
// returns its message ("" when the value is good, or when the key is
// under params:, which takes any value).
func checkSetValue(shape *rule, tree *yaml.Node, key string) string {
	sub := &decoder{name: "select", origin: make(map[*yaml.Node]string), budget: maxNodes}
	r, n := shape, tree
	for _, k := range strings.Split(key, ".") {
		var next *yaml.Node
		for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		switch {
		case r == nil || next == nil || r.open:
			return ""
		case r.fields != nil:
			f := r.field(k)
			if f == nil {
				return ""
			}
			r = f.rule
		case r.entry != nil:
			er, err := r.entry(sub, k, nil)
			if err != nil {
				return ""
			}
			r = er
		default:
			return ""
		}
		n = next
	}
	if r == nil || r.open || r.leaf == nil {
		return ""
	}
	if err := r.leaf(sub, n, key); err != nil {
		if ce := (*Error)(nil); errors.As(err, &ce) {
			return ce.Msg
		}
		return err.Error()
	}
	return ""
}

// within reports whether key path a is b or lies below it.
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".")
}

// checkSelect checks each range's algorithm against algorithms: (known,
// and of the collective when its entry names one) once both are decoded.
func (c *Config) checkSelect(d *decoder) {
	for _, sn := range d.selects {
		for i, r := range c.Select[sn.collective] {
			n, path := sn.nodes[i], sn.paths[i]
			a, ok := c.Algorithms[r.Algorithm]
			switch {
			case !ok:
				d.add(d.errorf(n, "%s.algorithm: got %q, want one of the algorithms: %s%s", path, r.Algorithm, knownList(c.AlgorithmNames), spelling.Hint(r.Algorithm, c.AlgorithmNames)))
			case a.Collective != "" && a.Collective != sn.collective:
				d.add(d.errorf(n, "%s.algorithm: %s is an algorithm of %s, not %s", path, r.Algorithm, a.Collective, sn.collective))
			}
		}
	}
	d.selects = nil
}
