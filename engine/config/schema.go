package config

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"kernbench/engine/spelling"
	"kernbench/engine/topology"
)

// This file is the schema of ccl.yaml: one rule per key, built over the
// value it decodes into. The same rules check --set paths and list the
// allowed keys in messages. Default values are not here: they come from
// default.yaml.

// Bounds that keep values representable by the engine: bandwidths become
// integer bytes per microsecond and times integer picoseconds.
//
// Simulated time is int64 picoseconds and may not pass sim.Horizon (2^62 ps,
// about 53 days): every duration here is at most 1000 s and the
// simulated-time watchdog at most 10^15 ns (about 11.6 days), so a
// configured value converted to ps cannot overflow and sums of them stay
// far below the horizon.
const (
	maxBandwidthGBps = 1e9  // 1e12 bytes per µs
	maxLatencyNs     = 1e12 // 1e15 ps, 1000 s
	maxDurationNs    = 1e12 // poll_interval_ns, ipcq_overhead_ns: 1000 s
	maxTimeoutNs     = 1e15 // deadlock_timeout_ns, max_sim_time_ns: about 11.6 days
	maxVCWeight      = 1e6  // vc_weights: weights multiply injection times
	// A queue pair keeps per-slot state in host memory and its ring is
	// n_slots × slot_size bytes: both bounded so the product cannot
	// overflow and the bookkeeping stays small.
	maxNSlots      = 1 << 16
	maxSlotSize    = 1 << 30 // 1 GiB
	maxCreditBytes = 1 << 20 // a credit is a pointer update (default 16 B)
	maxPEs         = math.MaxInt32
)

// decode decodes a ccl.yaml. Keys missing from defaults: and system: keep
// the values of base (nil: zero values, used for the embedded default).
// isDefault says data is the embedded default: its keys are not the
// user's (Config.DefaultsGiven).
func decode(name string, data []byte, sets []string, base *Config, isDefault bool) (*Config, error) {
	d := &decoder{name: name, origin: make(map[*yaml.Node]string), budget: maxNodes, isDefault: isDefault}
	root, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	return d.decodeRoot(root, sets, base)
}

// decodeRoot applies sets to the tree at root and decodes it.
func (d *decoder) decodeRoot(root *yaml.Node, sets []string, base *Config) (*Config, error) {
	name := d.name
	if len(sets) > 0 && (root.Kind == yaml.MappingNode || isNull(root)) {
		if isNull(root) {
			*root = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column}
		}
		shape := rootRule(&Config{Algorithms: make(map[string]*Algorithm)})
		for _, item := range sets {
			// A bad item is left out: the file's own mistakes are
			// reported with it.
			if err := d.applySet(root, shape, item); err != nil {
				d.add(err)
			}
		}
	}
	c := &Config{File: name, Algorithms: make(map[string]*Algorithm), DefaultsGiven: make(map[string]string)}
	if base != nil {
		c.Defaults = base.Defaults.clone()
		c.Defaults.Algorithm = "" // required in every file
		c.System = base.System.clone()
	}
	d.decode(rootRule(c), nil, root, "")
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

func rootRule(c *Config) *rule {
	return &rule{
		// defaults before algorithms: an entry's overrides start from them.
		fields: []field{
			{key: "defaults", required: true, rule: defaultsRule(c)},
			{key: "algorithms", required: true, rule: algorithmsRule(c)},
			{key: "system", rule: systemRule(&c.System)},
			{key: "select", rule: selectRule(c)},
		},
		// An unknown defaults.algorithm is reported beside other mistakes,
		// unless algorithms: itself is one.
		afterMistakes: true,
		after: func(d *decoder, _, _ *yaml.Node, _ string) error {
			if len(c.Algorithms) > 0 {
				c.checkSelect(d)
			}
			if c.Defaults.Algorithm == AutoAlgorithm && d.defaultAlgorithm != nil {
				if len(c.Select) == 0 {
					return d.errorf(d.defaultAlgorithm, "defaults.algorithm: auto picks from select:, which this configuration does not have (kernbench tune COLLECTIVE --write-select FILE writes one)")
				}
				return nil
			}
			if _, ok := c.Algorithms[c.Defaults.Algorithm]; !ok && d.defaultAlgorithm != nil && len(c.Algorithms) > 0 {
				return d.errorf(d.defaultAlgorithm, "defaults.algorithm: got %s, want one of the algorithms: %s%s",
					strconv.Quote(c.Defaults.Algorithm), knownList(c.AlgorithmNames), spelling.Hint(c.Defaults.Algorithm, c.AlgorithmNames))
			}
			return nil
		},
	}
}

// settingKey is one key of defaults:.
type settingKey struct {
	key  string
	rule func(s *Settings) *rule
	copy func(dst, src *Settings)
}

// setting builds a settingKey from the field it sets and the rule of its
// value.
func setting[T any](key string, get func(*Settings) *T, mk func(*T) *rule) settingKey {
	return settingKey{
		key:  key,
		rule: func(s *Settings) *rule { return mk(get(s)) },
		copy: func(dst, src *Settings) { *get(dst) = *get(src) },
	}
}

func minInt(min int64) func(*int) *rule { return func(p *int) *rule { return intLeaf(p, min) } }

// durationNs is an integer number of ns in [min, max].
func durationNs(min, max int64) func(*int64) *rule {
	what := map[int64]string{maxDurationNs: "1000 s", maxTimeoutNs: "about 11.6 days"}[max]
	return func(p *int64) *rule {
		return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			v, err := d.scalarInt(n, path)
			if err != nil {
				return err
			}
			if v > max {
				return d.errorf(n, "%s: got %s, want <= %d (%s)", path, describe(n), max, what)
			}
			return setIntValue(d, p, v, min, n, path)
		}}
	}
}

// settingKeys lists the keys of defaults: in file order; "algorithm" is
// first and is not allowed per algorithm.
var settingKeys = []settingKey{
	setting("algorithm", func(s *Settings) *string { return &s.Algorithm }, defaultAlgorithmLeaf),
	setting("world_size", func(s *Settings) *int { return &s.WorldSize }, minInt(1)),
	setting("buffer_kind", func(s *Settings) *string { return &s.BufferKind },
		func(p *string) *rule { return enumLeaf(p, bufferKinds, false) }),
	setting("backpressure", func(s *Settings) *string { return &s.Backpressure },
		func(p *string) *rule { return enumLeaf(p, backpressures, false) }),
	setting("poll_interval_ns", func(s *Settings) *int64 { return &s.PollIntervalNs }, durationNs(1, maxDurationNs)),
	setting("n_slots", func(s *Settings) *int { return &s.NSlots }, func(p *int) *rule { return boundedIntLeaf(p, 1, maxNSlots) }),
	setting("slot_size", func(s *Settings) *int64 { return &s.SlotSize }, func(p *int64) *rule { return boundedSizeLeaf(p, maxSlotSize) }),
	setting("vc_chunk_size", func(s *Settings) *int64 { return &s.VCChunkSize }, sizeLeaf),
	setting("vc_weights", func(s *Settings) *VCWeights { return &s.VCWeights }, vcWeightsRule),
	setting("ipcq_credit_size_bytes", func(s *Settings) *int64 { return &s.IpcqCreditSizeBytes }, func(p *int64) *rule { return boundedIntLeaf(p, 1, maxCreditBytes) }),
	setting("ipcq_overhead_ns", func(s *Settings) *int64 { return &s.IpcqOverheadNs }, durationNs(0, maxDurationNs)),
	setting("deadlock_timeout_ns", func(s *Settings) *int64 { return &s.DeadlockTimeoutNs }, durationNs(1, maxTimeoutNs)),
	setting("max_sim_time_ns", func(s *Settings) *int64 { return &s.MaxSimTimeNs }, durationNs(1, maxTimeoutNs)),
	setting("mesh_shape", func(s *Settings) *[]int { return &s.MeshShape }, meshShapeLeaf),
	setting("channels", func(s *Settings) *int { return &s.Channels }, func(p *int) *rule { return boundedIntLeaf(p, 1, topology.MaxChannels) }),
}

func settingKeyNamed(key string) *settingKey {
	for i := range settingKeys {
		if settingKeys[i].key == key {
			return &settingKeys[i]
		}
	}
	return nil
}

// defaultsRule decodes defaults: and notes the keys the user gave.
func defaultsRule(c *Config) *rule {
	r := settingsRule(&c.Defaults, true)
	r.onKey = func(d *decoder, key string, k, v *yaml.Node) {
		if d.given(v) {
			c.DefaultsGiven[key] = d.givenAt(v)
		}
	}
	return r
}

// settingsRule decodes defaults: (withAlgorithm) or the defaults keys of an
// algorithm entry.
func settingsRule(s *Settings, withAlgorithm bool) *rule {
	return &rule{fields: settingsFields(s, withAlgorithm)}
}

func settingsFields(s *Settings, withAlgorithm bool) []field {
	var fields []field
	for _, k := range settingKeys {
		if k.key == "algorithm" {
			if !withAlgorithm {
				continue
			}
			fields = append(fields, field{key: k.key, required: true, rule: k.rule(s)})
			continue
		}
		fields = append(fields, field{key: k.key, rule: k.rule(s)})
	}
	return fields
}

func defaultAlgorithmLeaf(p *string) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			return d.errorf(n, "%s: got %s, want string", path, describe(n))
		}
		*p = n.Value
		d.defaultAlgorithm = n
		return nil
	}}
}

func vcWeightsRule(w *VCWeights) *rule {
	return &rule{fields: []field{
		{key: "compute", rule: boundedIntLeaf(&w.Compute, 1, maxVCWeight)},
		{key: "comm", rule: boundedIntLeaf(&w.Comm, 1, maxVCWeight)},
	}}
}

func algorithmsRule(c *Config) *rule {
	return &rule{
		entry: func(d *decoder, name string, k *yaml.Node) (*rule, error) {
			a := &Algorithm{Name: name, Topology: DefaultTopology, overrides: c.Defaults.clone()}
			if k != nil {
				if !isIdent(name) {
					return nil, d.errorf(k, "algorithms: name %q is not an identifier (want letters, digits and _, not starting with a digit)", name)
				}
				if name == AutoAlgorithm {
					return nil, d.errorf(k, "algorithms: the name auto is reserved: it runs what select: picks for each size")
				}
				a.Line = k.Line
				c.Algorithms[name] = a
			}
			return algorithmRule(a), nil
		},
		// The names are listed (and an unknown defaults.algorithm
		// reported with them) after mistakes in the entries too.
		afterMistakes: true,
		after: func(d *decoder, k, v *yaml.Node, path string) error {
			c.AlgorithmNames = slices.Sorted(maps.Keys(c.Algorithms))
			if len(c.Algorithms) == 0 {
				return d.errorf(k, "%s: want at least one algorithm", path)
			}
			return nil
		},
	}
}

func algorithmRule(a *Algorithm) *rule {
	fields := []field{
		{key: "module", required: true, rule: moduleLeaf(&a.Module, &a.Shipped), missing: func(path string) string {
			// An entry without module: changes an algorithm defined
			// before; this one is new (a params: for a file run by path,
			// say), so it names its file.
			return fmt.Sprintf(": %s is no algorithm of the configuration yet, so its entry names its .star file (module: FILE.star, or --set %s.module=FILE.star)",
				strings.TrimPrefix(path, "algorithms."), path)
		}},
		{key: "topology", rule: enumLeaf(&a.Topology, topologies, false)},
		{key: "collective", rule: enumLeaf(&a.Collective, collectives, true)},
		{key: "params", rule: paramsRule(&a.Params, &a.ParamsPos)},
	}
	fields = append(fields, settingsFields(&a.overrides, false)...)
	return &rule{
		fields: fields,
		onKey: func(d *decoder, key string, k, v *yaml.Node) {
			if label, set := d.origin[v]; set && key == "module" {
				a.ModuleSet = label
			}
			if key == "topology" {
				a.TopologyGiven = true
			}
			if settingKeyNamed(key) != nil {
				a.OverrideKeys = append(a.OverrideKeys, key)
				if a.OverridePos == nil {
					a.OverridePos = make(map[string]string)
				}
				a.OverridePos[key] = d.pos(k)
				if label, set := d.origin[v]; set {
					// A --set item that replaced the file's value: the
					// item is where it was given, not the key's line.
					a.OverridePos[key] = label
				}
			}
		},
		after: func(*decoder, *yaml.Node, *yaml.Node, string) error {
			slices.Sort(a.OverrideKeys)
			return nil
		},
	}
}

func systemRule(s *System) *rule {
	var placement []*yaml.Node // the nodes of placement's entries, for messages
	return &rule{
		fields: []field{
			{key: "sips", rule: intLeaf(&s.Sips, 1)},
			{key: "cubes_per_sip", rule: intLeaf(&s.CubesPerSip, 1)},
			{key: "pes_per_cube", rule: intLeaf(&s.PesPerCube, 1)},
			{key: "links", rule: &rule{fields: []field{
				{key: "pe_noc", rule: linkRule(&s.Links.PeNoc)},
				{key: "ucie", rule: linkRule(&s.Links.Ucie)},
				{key: "pcie", rule: linkRule(&s.Links.Pcie)},
			}}},
			{key: "memory", rule: &rule{fields: []field{
				{key: "tcm", rule: memoryRule(&s.Memory.Tcm)},
				{key: "sram", rule: memoryRule(&s.Memory.Sram)},
				{key: "hbm", rule: memoryRule(&s.Memory.Hbm)},
			}}},
			{key: "math", rule: &rule{fields: []field{
				{key: "bytes_per_ns", rule: bandwidthLeaf(&s.Math.BytesPerNs)},
				{key: "latency_ns", rule: latencyLeaf(&s.Math.LatencyNs)},
			}}},
			{key: "placement", rule: placementLeaf(&s.Placement, &placement)},
			{key: "faults", rule: faultsLeaf(&s.Faults)},
		},
		after: func(d *decoder, k, v *yaml.Node, path string) error {
			at := k
			if at == nil {
				at = v
			}
			// Blame a system: line the user wrote, else the last of the
			// three keys they gave (a --set item, a line of their file),
			// not the system: line of the embedded default.
			for i := 0; v != nil && !d.given(k) && i+1 < len(v.Content); i += 2 {
				switch v.Content[i].Value {
				case "sips", "cubes_per_sip", "pes_per_cube":
					if d.given(v.Content[i+1]) {
						at = v.Content[i+1]
					}
				}
			}
			total := uint64(1)
			for _, f := range []int{s.Sips, s.CubesPerSip, s.PesPerCube} {
				hi, lo := bits.Mul64(total, uint64(f))
				if hi != 0 || lo > maxPEs {
					return d.errorf(at, "%s: sips × cubes_per_sip × pes_per_cube is more than %d PEs", path, maxPEs)
				}
				total = lo
			}
			usedBy := make(map[int]int, len(s.Placement))
			for r, pe := range s.Placement {
				if uint64(pe) >= total {
					return d.errorf(placement[r], "%s.placement[%d]: got %d, want < %d (sips × cubes_per_sip × pes_per_cube)", path, r, pe, total)
				}
				if prev, dup := usedBy[pe]; dup {
					return d.errorf(placement[r], "%s.placement[%d]: PE %d is already used by rank %d", path, r, pe, prev)
				}
				usedBy[pe] = r
			}
			return nil
		},
	}
}

func linkRule(l *Link) *rule {
	return &rule{fields: []field{
		{key: "bandwidth_gbps", rule: bandwidthLeaf(&l.BandwidthGBps)},
		{key: "latency_ns", rule: latencyLeaf(&l.LatencyNs)},
	}}
}

func memoryRule(m *Memory) *rule {
	return &rule{fields: []field{
		{key: "capacity", rule: sizeLeaf(&m.Capacity)},
		{key: "bandwidth_gbps", rule: bandwidthLeaf(&m.BandwidthGBps)},
		{key: "latency_ns", rule: latencyLeaf(&m.LatencyNs)},
	}}
}

// Leaves.

func enumLeaf(p *string, allowed []string, emptyOK bool) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		ok := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" &&
			(slices.Contains(allowed, n.Value) || emptyOK && n.Value == "")
		if !ok {
			return d.errorf(n, "%s: got %s, want one of %s%s", path, describe(n), strings.Join(allowed, ", "), spelling.Hint(n.Value, allowed))
		}
		*p = n.Value
		return nil
	}}
}

func moduleLeaf(p *string, shipped *bool) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		*shipped = d.from[n] != ""
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			return d.errorf(n, "%s: got %s, want string", path, describe(n))
		}
		if !strings.HasSuffix(n.Value, ".star") || len(n.Value) == len(".star") {
			return d.errorf(n, "%s: got %s, want the path of a .star file", path, describe(n))
		}
		*p = n.Value
		return nil
	}}
}

// scalarInt decodes an integer scalar; floats, strings and the rest are
// errors.
func (d *decoder) scalarInt(n *yaml.Node, path string) (int64, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, d.errorf(n, "%s: got %s, want int", path, describe(n))
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		return 0, d.errorf(n, "%s: got %s, want <= %d", path, describe(n), int64(math.MaxInt64))
	}
	return v, nil
}

func intLeaf[T int | int64](p *T, min int64) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, err := d.scalarInt(n, path)
		if err != nil {
			return err
		}
		return setIntValue(d, p, v, min, n, path)
	}}
}

// boundedIntLeaf decodes an int in [min, max].
func boundedIntLeaf[T int | int64](p *T, min, max int64) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, err := d.scalarInt(n, path)
		if err != nil {
			return err
		}
		if v > max {
			return d.errorf(n, "%s: got %s, want <= %d", path, describe(n), max)
		}
		return setIntValue(d, p, v, min, n, path)
	}}
}

// setIntValue stores v >= min in *p.
func setIntValue[T int | int64](d *decoder, p *T, v, min int64, n *yaml.Node, path string) error {
	if v < min {
		return d.errorf(n, "%s: got %s, want >= %d", path, describe(n), min)
	}
	if int64(T(v)) != v {
		return d.errorf(n, "%s: got %s, too large", path, describe(n))
	}
	*p = T(v)
	return nil
}

// boundedSizeLeaf is sizeLeaf with an upper bound.
func boundedSizeLeaf(p *int64, max int64) *rule {
	inner := sizeLeaf(p)
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		if err := inner.leaf(d, n, path); err != nil {
			return err
		}
		if *p > max {
			return d.errorf(n, "%s: got %s, want <= %d", path, describe(n), max)
		}
		return nil
	}}
}

func sizeLeaf(p *int64) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		var v int64
		switch {
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int":
			var err error
			if v, err = d.scalarInt(n, path); err != nil {
				return err
			}
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
			var err error
			if v, err = ParseSize(n.Value); err != nil {
				return d.errorf(n, "%s: %v", path, err)
			}
		default:
			return d.errorf(n, "%s: got %s, want a size (like 4096, 4K or 1MiB)", path, describe(n))
		}
		if v < 1 {
			return d.errorf(n, "%s: got %s, want >= 1", path, describe(n))
		}
		*p = v
		return nil
	}}
}

// number decodes an int or float scalar to a finite float64.
func (d *decoder) number(n *yaml.Node, path string) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return 0, d.errorf(n, "%s: got %s, want number", path, describe(n))
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, d.errorf(n, "%s: got %s, want a finite number", path, describe(n))
	}
	if v == 0 {
		v = 0 // no -0
	}
	return v, nil
}

// decimals is the number of digits after the point of the shortest decimal
// that reads back as v.
func decimals(v float64) int {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// bandwidthLeaf decodes a bandwidth in GB/s (bytes per ns): > 0, at most 3
// decimals, because the engine keeps it in whole bytes per microsecond.
func bandwidthLeaf(p *float64) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, err := d.number(n, path)
		switch {
		case err != nil:
			return err
		case v <= 0:
			return d.errorf(n, "%s: got %s, want > 0", path, describe(n))
		case v > maxBandwidthGBps:
			return d.errorf(n, "%s: got %s, want <= %g", path, describe(n), float64(maxBandwidthGBps))
		case decimals(v) > 3:
			return d.errorf(n, "%s: got %s, want at most 3 decimal places (bandwidth is kept in whole bytes per µs)", path, describe(n))
		}
		*p = v
		return nil
	}}
}

// latencyLeaf decodes a latency in ns: >= 0, at most 3 decimals, because
// the engine keeps time in whole picoseconds.
func latencyLeaf(p *float64) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, err := d.number(n, path)
		switch {
		case err != nil:
			return err
		case v < 0:
			return d.errorf(n, "%s: got %s, want >= 0", path, describe(n))
		case v > maxLatencyNs:
			return d.errorf(n, "%s: got %s, want <= %g", path, describe(n), float64(maxLatencyNs))
		case decimals(v) > 3:
			return d.errorf(n, "%s: got %s, want at most 3 decimal places (time is kept in whole picoseconds)", path, describe(n))
		}
		*p = v
		return nil
	}}
}

// intList decodes a sequence of ints >= min; null is an empty list.
func (d *decoder) intList(n *yaml.Node, path string, min int64) ([]int, []*yaml.Node, error) {
	if isNull(n) {
		return nil, nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, nil, d.errorf(n, "%s: got %s, want sequence of int", path, describe(n))
	}
	out := make([]int, len(n.Content))
	nodes := make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		e, err := d.resolve(e)
		if err != nil {
			return nil, nil, err
		}
		p := fmt.Sprintf("%s[%d]", path, i)
		v, err := d.scalarInt(e, p)
		if err != nil {
			return nil, nil, err
		}
		if err := setIntValue(d, &out[i], v, min, e, p); err != nil {
			return nil, nil, err
		}
		nodes[i] = e
	}
	return out, nodes, nil
}

func meshShapeLeaf(p *[]int) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, _, err := d.intList(n, path, 1)
		if err != nil {
			return err
		}
		if v != nil && len(v) != 2 {
			return d.errorf(n, "%s: got %d entries, want [rows, cols]", path, len(v))
		}
		*p = v
		return nil
	}}
}

func placementLeaf(p *[]int, nodes *[]*yaml.Node) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, ns, err := d.intList(n, path, 0)
		if err != nil {
			return err
		}
		*p, *nodes = v, ns
		return nil
	}}
}

// faultsLeaf decodes system.faults: a list of entries, each a link (by
// name) or a PE (by index) and how it deviates; null is none.
func faultsLeaf(p *[]Fault) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		if isNull(n) {
			*p = nil
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return d.errorf(n, "%s: got %s, want a list of faults (each with link: NAME or pe: INDEX)", path, describe(n))
		}
		faults := make([]Fault, len(n.Content))
		for i, item := range n.Content {
			f := &faults[i]
			f.PE, f.StopAtNs = -1, -1
			itemPath := fmt.Sprintf("%s[%d]", path, i)
			before := len(d.errs)
			d.decode(faultRule(f), nil, item, itemPath)
			if len(d.errs) > before {
				continue
			}
			f.Pos = d.pos(item)
			if label, set := d.origin[item]; set {
				f.Pos = label
			}
			if err := f.check(d, item, itemPath); err != nil {
				d.add(err)
			}
		}
		*p = faults
		return nil
	}}
}

func faultRule(f *Fault) *rule {
	return &rule{fields: []field{
		{key: "link", rule: &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Value == "" {
				return d.errorf(n, "%s: got %s, want a resource name as `kernbench check --show-map` prints it (\"ucie c0->c1\")", path, describe(n))
			}
			f.Link = n.Value
			return nil
		}}},
		{key: "pe", rule: boundedIntLeaf(&f.PE, 0, maxPEs)},
		{key: "bandwidth_factor", rule: factorLeaf(&f.BandwidthFactor)},
		{key: "latency_ns", rule: latencyLeaf(&f.LatencyNs)},
		{key: "slowdown", rule: factorLeaf(&f.Slowdown)},
		{key: "jitter_ns", rule: latencyLeaf(&f.JitterNs)},
		{key: "seed", rule: &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
			v, err := d.scalarInt(n, path)
			if err != nil {
				return err
			}
			if v < 0 {
				return d.errorf(n, "%s: got %s, want >= 0", path, describe(n))
			}
			f.Seed = uint64(v)
			return nil
		}}},
		{key: "stop_at_ns", rule: latencyLeaf(&f.StopAtNs)},
	}}
}

// factorLeaf decodes a factor: > 0, at most 1000.
func factorLeaf(p *float64) *rule {
	return &rule{leaf: func(d *decoder, n *yaml.Node, path string) error {
		v, err := d.number(n, path)
		switch {
		case err != nil:
			return err
		case v <= 0 || v > 1000:
			return d.errorf(n, "%s: got %s, want > 0 and <= 1000", path, describe(n))
		}
		*p = v
		return nil
	}}
}

// check says what an entry lacks or mixes: exactly one of link and pe;
// what applies to links (bandwidth_factor, latency_ns, jitter_ns, seed)
// only on a link, slowdown only on a PE; a seed only with jitter; at
// least one change.
func (f *Fault) check(d *decoder, n *yaml.Node, path string) error {
	isLink, isPE := f.Link != "", f.PE >= 0
	switch {
	case isLink == isPE:
		return d.errorf(n, "%s: give exactly one of link: NAME and pe: INDEX", path)
	case isLink && f.Slowdown != 0:
		return d.errorf(n, "%s: slowdown is for a PE (pe: INDEX); a link takes bandwidth_factor, latency_ns, jitter_ns (with seed) and stop_at_ns", path)
	case isPE && (f.BandwidthFactor != 0 || f.LatencyNs != 0 || f.JitterNs != 0 || f.Seed != 0):
		return d.errorf(n, "%s: bandwidth_factor, latency_ns, jitter_ns and seed are for a link (link: NAME); a PE takes slowdown and stop_at_ns", path)
	case f.Seed != 0 && f.JitterNs == 0:
		return d.errorf(n, "%s: seed without jitter_ns changes nothing", path)
	case (f.BandwidthFactor == 0 || f.BandwidthFactor == 1) && f.LatencyNs == 0 && (f.Slowdown == 0 || f.Slowdown == 1) && f.JitterNs == 0 && f.StopAtNs < 0:
		return d.errorf(n, "%s: the fault changes nothing: give bandwidth_factor, latency_ns, jitter_ns or stop_at_ns (a link), slowdown or stop_at_ns (a PE)", path)
	}
	return nil
}

// paramsRule decodes params:, any YAML mapping whose top-level keys are
// identifiers (they become keyword arguments of kernel()).
func paramsRule(p *map[string]any, pos *map[string]string) *rule {
	return &rule{open: true, leaf: func(d *decoder, n *yaml.Node, path string) error {
		if isNull(n) {
			*p, *pos = nil, nil
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return d.errorf(n, "%s: got %s, want mapping", path, describe(n))
		}
		pairs, err := d.mapping(nil, n, path)
		if err != nil {
			return err
		}
		for _, pr := range pairs {
			if !isIdent(pr.key) {
				return d.errorf(pr.k, "%s: key %q is not an identifier (params are keyword arguments of kernel())", path, pr.key)
			}
		}
		v, err := d.value(n, path)
		if err != nil {
			return err
		}
		*p = v.(map[string]any)
		*pos = make(map[string]string, len(pairs))
		for _, pr := range pairs {
			at := d.pos(pr.k)
			if _, set := d.origin[pr.k]; !set && d.given(pr.v) {
				at = d.givenAt(pr.v)
			}
			(*pos)[pr.key] = at
		}
		return nil
	}}
}

// value decodes any YAML value to int64, float64, string, bool, []any or
// map[string]any.
func (d *decoder) value(n *yaml.Node, path string) (any, error) {
	n, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, e := range n.Content {
			if out[i], err = d.value(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case yaml.MappingNode:
		pairs, err := d.mapping(nil, n, path)
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, len(pairs))
		for _, pr := range pairs {
			if out[pr.key], err = d.value(pr.v, join(path, pr.key)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case yaml.ScalarNode:
	default:
		return nil, d.errorf(n, "%s: unexpected YAML node", path)
	}
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			return nil, d.errorf(n, "%s: got %s, want an int64", path, describe(n))
		}
		return v, nil
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil {
			return nil, d.errorf(n, "%s: got %s, want a float", path, describe(n))
		}
		return v, nil
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return nil, d.errorf(n, "%s: got %s, want a bool", path, describe(n))
		}
		return v, nil
	case "!!str", "!!timestamp":
		return n.Value, nil
	default:
		return nil, d.errorf(n, "%s: got %s, want int, float, string, bool, sequence or mapping", path, describe(n))
	}
}

// isIdent reports whether s is an ASCII identifier.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseFaults decodes --fault items, each a system.faults entry written
// as key=value pairs joined by commas ("link=ucie c0->c1,bandwidth_factor=0.5",
// "pe=3,slowdown=2"), with the same keys, checks and messages as the
// file's entries; every mistake of every item is reported.
func ParseFaults(items []string) ([]Fault, error) {
	d := &decoder{name: "--fault", origin: make(map[*yaml.Node]string), budget: maxNodes}
	var out []Fault
	for _, item := range items {
		// Past maxErrors decode does nothing: an item decoded then would
		// be an empty fault, "give exactly one of link and pe" however
		// it was written. Stop, as Load does, with the line saying so.
		if d.stopped() {
			break
		}
		label := "--fault " + item
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		d.origin[n] = label
		bad := false
		for _, kv := range strings.Split(item, ",") {
			if d.stopped() {
				break
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				d.add(d.errorf(n, "%q is not key=value (keys: %s)", kv, faultRule(&Fault{}).allowed()))
				bad = true
				continue
			}
			// "link=ucie c0->c1 bandwidth_factor=0.5": a space where a comma
			// belongs makes the second key part of the link's name, and
			// the entry would be "changing nothing" with no word of why.
			if eq := strings.Index(v, "="); eq >= 0 {
				fix := ""
				if sep := strings.LastIndexAny(v[:eq], " ;:"); sep > 0 {
					fix = fmt.Sprintf("; did you mean %s=%s,%s?", k, strings.TrimRight(v[:sep], " ;:"), v[sep+1:])
				}
				d.add(d.errorf(n, "%s %q holds another key=value: pairs are joined with commas%s", strings.TrimSpace(k), strings.TrimSpace(v), fix))
				bad = true
				continue
			}
			kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.TrimSpace(k)}
			vn := &yaml.Node{Kind: yaml.ScalarNode, Value: strings.TrimSpace(v)}
			d.origin[kn], d.origin[vn] = label, label
			n.Content = append(n.Content, kn, vn)
		}
		if bad {
			continue
		}
		f := Fault{PE: -1, StopAtNs: -1}
		before := len(d.errs)
		d.decode(faultRule(&f), nil, n, "fault")
		if len(d.errs) > before {
			continue
		}
		f.Pos = label
		if err := f.check(d, n, "fault"); err != nil {
			d.add(err)
			continue
		}
		out = append(out, f)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return out, nil
}
