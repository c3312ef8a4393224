package config

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// LoadOverlay decodes a local ccl.yaml laid over the embedded default: the
// local file changes only what it names. Mappings merge key by key (so
// `defaults: {world_size: 4}` changes one setting and leaves the rest, and
// defaults.algorithm and algorithms: may be left out); a scalar or a
// sequence replaces the default's value. Algorithm entries are added to the
// shipped ones. An entry that names a shipped algorithm and gives module:
// replaces the shipped entry as a whole (it is another file, whose kernel
// need not take the shipped params); one without module: changes only the
// keys it names (e.g. params or buffer_kind of the shipped algorithm).
// Messages about nodes that come from the default name DefaultName. sets are
// applied to the merged tree, as in Load. A file identical to the default
// gives no defaults key of the user's (Config.DefaultsGiven).
func LoadOverlay(name string, data []byte, sets []string) (*Config, error) {
	// A byte-for-byte copy of the default (the shipped ccl.yaml in a clone
	// of the repository) gives no setting of the user's.
	d := &decoder{name: name, origin: make(map[*yaml.Node]string), from: make(map[*yaml.Node]string), budget: maxNodes,
		isDefault: bytes.Equal(data, defaultYAML)}
	top, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	bd := &decoder{name: DefaultName, budget: maxNodes}
	base, err := bd.parse(defaultYAML)
	if err != nil {
		return nil, err
	}
	markTree(d.from, base, DefaultName)
	root := top
	if isNull(top) {
		root = base
	} else if top.Kind == yaml.MappingNode {
		root = d.merge(base, top, "")
	}
	// Keys the merged tree leaves out keep the default's values, as in
	// Load: a --set applied to it can still make a mapping null
	// (--set defaults.vc_weights=), which must mean "no keys given", not
	// zero weights and bandwidths the machine refuses later without
	// saying which setting made them.
	values, err := embedded()
	if err != nil {
		return nil, err
	}
	return d.decodeRoot(root, sets, values)
}

// merge lays the mapping top over the mapping base (modified in place and
// returned). path is the key path of the two mappings.
func (d *decoder) merge(base, top *yaml.Node, path string) *yaml.Node {
	index := make(map[string]int, len(base.Content)/2) // key -> position of its value in base.Content
	for i := 0; i+1 < len(base.Content); i += 2 {
		index[base.Content[i].Value] = i + 1
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		j, inBase := index[k.Value]
		if k.Kind != yaml.ScalarNode || !inBase || seen[k.Value] {
			// New keys, odd keys and duplicates go in as they are: the
			// decoder reports what is wrong with them.
			base.Content = append(base.Content, k, v)
			seen[k.Value] = true
			continue
		}
		seen[k.Value] = true
		bv := base.Content[j]
		switch {
		case isNull(v) && bv.Kind == yaml.MappingNode:
			// "defaults:" with nothing under it changes nothing.
			base.Content[j-1] = k
		case v.Kind == yaml.MappingNode && bv.Kind == yaml.MappingNode && !(path == "algorithms" && hasKey(v, "module")):
			base.Content[j-1] = k
			base.Content[j] = d.merge(bv, v, join(path, k.Value))
		default:
			base.Content[j-1], base.Content[j] = k, v
		}
	}
	return base
}

func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return true
		}
	}
	return false
}
