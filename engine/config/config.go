package config

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"kernbench/engine/collective"
	"kernbench/engine/topology"
)

// DefaultName is the file name used for the embedded default configuration.
const DefaultName = "ccl.yaml"

// DefaultTopology is the topology of an algorithm entry without topology:.
const DefaultTopology = "ring_1d"

// defaultYAML is the shipped default configuration; a test keeps it equal to
// the repository's ccl.yaml.
//
//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the bytes of the embedded default ccl.yaml.
func DefaultYAML() []byte { return slices.Clone(defaultYAML) }

// Config is a decoded and validated ccl.yaml.
type Config struct {
	File           string                // name given to Load, used in messages
	Defaults       Settings              // defaults:
	Algorithms     map[string]*Algorithm // algorithms:, by name
	AlgorithmNames []string              // keys of Algorithms, sorted
	System         System                // system:
	// Select is select:, the ranges of buffer sizes each collective's
	// algorithm `auto` picks from (kernbench tune writes it), by
	// collective; nil when absent.
	Select map[string][]SelectRange `json:",omitempty"`
	// DefaultsGiven maps each key of defaults: that the user gave (in a
	// ccl.yaml or --config file, or with a --set item) to where:
	// "FILE:LINE" or "--set ITEM". A key only the embedded default gives
	// is absent: kernbench may pick such a value by itself (where an
	// MSCCL schedule's rx rings fit), never a given one. Not part of the
	// configuration's JSON (kernbench's digest of it).
	DefaultsGiven map[string]string `json:"-"`
}

// Settings holds every key of defaults:. All but Algorithm may also be set
// per algorithm (see Config.Settings).
type Settings struct {
	Algorithm           string    // algorithm: a key of algorithms:
	WorldSize           int       // world_size: >= 1
	BufferKind          string    // buffer_kind: tcm | hbm | sram
	Backpressure        string    // backpressure: sleep | poll
	PollIntervalNs      int64     // poll_interval_ns: >= 1
	NSlots              int       // n_slots: >= 1
	SlotSize            int64     // slot_size: >= 1 byte (size string allowed)
	VCChunkSize         int64     // vc_chunk_size: >= 1 byte (size string allowed)
	VCWeights           VCWeights // vc_weights: {compute, comm}
	IpcqCreditSizeBytes int64     // ipcq_credit_size_bytes: >= 1
	IpcqOverheadNs      int64     // ipcq_overhead_ns: >= 0
	DeadlockTimeoutNs   int64     // deadlock_timeout_ns: >= 1
	MaxSimTimeNs        int64     // max_sim_time_ns: >= 1
	MeshShape           []int     // mesh_shape: optional [rows, cols], both >= 1
	Channels            int       // channels: directions per neighbour of a builtin topology (0 = absent = 1)
}

// VCWeights are the weighted round-robin weights of a PE's two DMA virtual
// channels, each >= 1.
type VCWeights struct{ Compute, Comm int }

// Algorithm is one entry of algorithms:.
type Algorithm struct {
	Name     string // the entry's key
	Module   string // module: the .star file, relative to the config's directory
	Topology string // topology: one of Topologies(); DefaultTopology if absent
	// TopologyGiven says the entry names its topology (topology:, in a
	// file or a --set item); without it Topology is DefaultTopology, not
	// a choice of the entry's author.
	TopologyGiven bool           `json:"-"`
	Collective    string         // collective: "" or one of Collectives()
	Params        map[string]any // params: int64, float64, string, bool, []any, map[string]any values
	Line          int            // line of the entry's key in the file (0 if created by --set)
	// ParamsPos is where each key of Params was given: "FILE:LINE", or
	// "--set KEY=VALUE" for one a --set item gave (a message about a
	// param names it, not the entry's line in another file).
	ParamsPos map[string]string
	// ModuleSet is "--set KEY=VALUE" when a --set item gave module, else
	// "" (the entry's line says where).
	ModuleSet string
	// Shipped: module comes from the embedded default (LoadOverlay), so
	// it is relative to the working directory or the embedded files, not
	// to the local ccl.yaml's directory.
	Shipped bool

	// OverrideKeys names the defaults keys this entry sets for itself,
	// sorted; Config.Settings applies them.
	OverrideKeys []string
	// OverridePos is where each of OverrideKeys was set: "FILE:LINE", or
	// "--set KEY=VALUE" for one a --set item added.
	OverridePos map[string]string

	// overrides holds the entry's values of OverrideKeys; its other
	// fields are the defaults as decoded before the entry.
	overrides Settings
}

// ParamPos is where a's param key was given (ParamsPos); false when a is
// nil or does not know.
func (a *Algorithm) ParamPos(key string) (string, bool) {
	if a == nil {
		return "", false
	}
	pos, ok := a.ParamsPos[key]
	return pos, ok
}

// ParamsOrNil is a's params, or nil when a is nil (a file run without a
// ccl.yaml entry).
func (a *Algorithm) ParamsOrNil() map[string]any {
	if a == nil {
		return nil
	}
	return a.Params
}

// System describes the simulated machine.
type System struct {
	Sips, CubesPerSip, PesPerCube int      // each >= 1
	Links                         Links    // links:
	Memory                        Memories // memory:
	Math                          Math     // math:
	Placement                     []int    // placement: optional, rank r -> global PE index
	Faults                        []Fault  // faults: optional, resources that deviate
}

// Fault is one entry of system.faults: a link or memory port or math unit
// (Link, by the name `kernbench check --show-map` prints) or a whole PE
// (PE >= 0) that deviates from its kind. Zero values change nothing.
type Fault struct {
	Link string // link: a resource name ("ucie c0->c1"); "" for a PE
	PE   int    // pe: a PE index (-1 for a link)
	// bandwidth_factor (links): bandwidth × factor, > 0.
	BandwidthFactor float64
	// latency_ns (links): added to the latency.
	LatencyNs float64
	// slowdown (PEs): its math unit and memory ports take × slowdown.
	Slowdown float64
	// jitter_ns, seed (links): each transfer waits a further 0 to
	// jitter_ns, drawn from a stream of seed and the link's name.
	JitterNs float64
	Seed     uint64
	// stop_at_ns: the resource (a PE: its math unit, memory ports and NoC
	// links) carries nothing from then on; < 0: it never stops.
	StopAtNs float64
	// Pos is where the entry was given ("FILE:LINE" or "--fault ITEM").
	Pos string `json:"-"`
}

// Location is where rank sits: its SIP, its cube within the SIP and its PE
// within the cube (system.placement, else rank r on the r-th PE).
func (s *System) Location(rank int) (sip, cube, pe int, err error) {
	id := rank
	if s.Placement != nil {
		if rank >= len(s.Placement) {
			return 0, 0, 0, fmt.Errorf("system.placement lists %d PEs, rank %d has none", len(s.Placement), rank)
		}
		id = s.Placement[rank]
	}
	if id < 0 || id >= s.NumPEs() {
		if id > 0 && s.Placement == nil {
			// Only a world size larger than the machine gets here (kernbench
			// check --world-sizes past it): say how to grow it, as a run's
			// own world-size check does. The rank is the first one out, so
			// the world size may need more SIPs than this rank does.
			return 0, 0, 0, fmt.Errorf("rank %d is on PE %d, outside the machine's %d PEs; grow it with --set system.sips=N (%d PEs per SIP)",
				rank, id, s.NumPEs(), s.CubesPerSip*s.PesPerCube)
		}
		return 0, 0, 0, fmt.Errorf("rank %d is on PE %d, outside the machine's %d PEs", rank, id, s.NumPEs())
	}
	return id / (s.CubesPerSip * s.PesPerCube), id / s.PesPerCube % s.CubesPerSip, id % s.PesPerCube, nil
}

// NumPEs is the number of PEs in the system.
func (s *System) NumPEs() int { return s.Sips * s.CubesPerSip * s.PesPerCube }

// Links are the three kinds of directed link.
type Links struct{ PeNoc, Ucie, Pcie Link }

// Link is a directed link: bandwidth in GB/s (= bytes per ns, > 0, at most 3
// decimals) and latency in ns (>= 0, at most 3 decimals).
type Link struct{ BandwidthGBps, LatencyNs float64 }

// Memories are the three kinds of memory.
type Memories struct{ Tcm, Sram, Hbm Memory }

// Memory is a memory port and its capacity in bytes.
type Memory struct {
	Capacity      int64
	BandwidthGBps float64
	LatencyNs     float64
}

// Math is a PE's elementwise tile math unit.
type Math struct{ BytesPerNs, LatencyNs float64 }

// The enumerations of the schema, in the order messages list them.
var (
	bufferKinds   = []string{"tcm", "hbm", "sram"}
	backpressures = []string{"sleep", "poll"}
	topologies    = topology.Names() // one list: the topology package declares them
	collectives   = collective.Names()
)

// BufferKinds lists the values of buffer_kind.
func BufferKinds() []string { return slices.Clone(bufferKinds) }

// Backpressures lists the values of backpressure.
func Backpressures() []string { return slices.Clone(backpressures) }

// Topologies lists the values of an algorithm's topology.
func Topologies() []string { return slices.Clone(topologies) }

// Collectives lists the non-empty values of an algorithm's collective.
func Collectives() []string { return slices.Clone(collectives) }

// Load decodes ccl.yaml bytes. name prefixes every message ("ccl.yaml:12:
// ..."). sets are --set items "key.path=value", applied in order to the
// node tree before decoding; the value is YAML (a scalar, [sequence] or
// {mapping}) and missing mapping keys are created where the schema allows.
// Keys left out of defaults: and system: keep the values of Default().
func Load(name string, data []byte, sets []string) (*Config, error) {
	base, err := embedded()
	if err != nil {
		return nil, err
	}
	return decode(name, data, sets, base, false)
}

// LoadDefault decodes the embedded default as the configuration in force
// (no ccl.yaml), with sets applied as in Load. name prefixes messages.
// Unlike Load of the same bytes, its keys are not given by the user
// (Config.DefaultsGiven lists only what sets give).
func LoadDefault(name string, sets []string) (*Config, error) {
	base, err := embedded()
	if err != nil {
		return nil, err
	}
	return decode(name, defaultYAML, sets, base, true)
}

// embedded is the decoded default configuration, decoded once.
var embedded = sync.OnceValues(func() (*Config, error) {
	c, err := decode(DefaultName, defaultYAML, nil, nil, true)
	if err != nil {
		return nil, fmt.Errorf("internal error: embedded default.yaml: %w", err)
	}
	return c, nil
})

// Default returns the embedded default configuration (a fresh copy each
// call). It panics only if the embedded file is broken, which tests rule out.
func Default() *Config {
	c, err := embedded()
	if err != nil {
		panic(err)
	}
	return c.Clone()
}

// Settings returns Defaults with the named algorithm's overrides applied.
func (c *Config) Settings(algorithm string) (Settings, error) {
	a, ok := c.Algorithms[algorithm]
	if !ok {
		return Settings{}, fmt.Errorf("unknown algorithm %q (known: %s)", algorithm, knownList(c.AlgorithmNames))
	}
	s := c.Defaults.clone()
	for _, key := range a.OverrideKeys {
		if k := settingKeyNamed(key); k != nil {
			k.copy(&s, &a.overrides)
		}
	}
	s.MeshShape = slices.Clone(s.MeshShape)
	return s, nil
}

// Algorithm returns the entry named name, or an error listing the known
// names.
func (c *Config) Algorithm(name string) (*Algorithm, error) {
	a, ok := c.Algorithms[name]
	if !ok {
		return nil, fmt.Errorf("unknown algorithm %q (known: %s)", name, knownList(c.AlgorithmNames))
	}
	return a, nil
}

func knownList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	out := &Config{
		File:           c.File,
		Defaults:       c.Defaults.clone(),
		AlgorithmNames: slices.Clone(c.AlgorithmNames),
		System:         c.System.clone(),
		DefaultsGiven:  maps.Clone(c.DefaultsGiven),
	}
	if c.Select != nil {
		out.Select = make(map[string][]SelectRange, len(c.Select))
		for k, rs := range c.Select {
			rs = slices.Clone(rs)
			for i := range rs {
				rs[i].Set = slices.Clone(rs[i].Set)
			}
			out.Select[k] = rs
		}
	}
	if c.Algorithms != nil {
		out.Algorithms = make(map[string]*Algorithm, len(c.Algorithms))
		for _, name := range slices.Sorted(maps.Keys(c.Algorithms)) {
			out.Algorithms[name] = c.Algorithms[name].clone()
		}
	}
	return out
}

func (s Settings) clone() Settings {
	s.MeshShape = slices.Clone(s.MeshShape)
	return s
}

func (s System) clone() System {
	s.Placement = slices.Clone(s.Placement)
	s.Faults = slices.Clone(s.Faults)
	return s
}

func (a *Algorithm) clone() *Algorithm {
	b := *a
	b.overrides = a.overrides.clone()
	b.OverrideKeys = slices.Clone(a.OverrideKeys)
	b.OverridePos = maps.Clone(a.OverridePos)
	b.ParamsPos = maps.Clone(a.ParamsPos)
	if a.Params != nil {
		b.Params = cloneValue(a.Params).(map[string]any)
	}
	return &b
}

// cloneValue deep-copies a decoded params value.
func cloneValue(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out[k] = cloneValue(v[k])
		}
		return out
	default:
		return v
	}
}
