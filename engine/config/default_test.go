package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// The shipped ccl.yaml and the embedded default must be the same file.
func TestShippedConfigMatchesEmbedded(t *testing.T) {
	shipped, err := os.ReadFile("../../ccl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := os.ReadFile("default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, embedded) {
		t.Errorf("ccl.yaml and engine/config/default.yaml differ (-default.yaml +ccl.yaml):\n%s",
			cmp.Diff(string(embedded), string(shipped)))
	}
	if !bytes.Equal(DefaultYAML(), embedded) {
		t.Error("DefaultYAML() differs from default.yaml")
	}
}

// The default config must spell out every key of defaults: and system:, so
// that it is the one place where default values live.
func TestDefaultYAMLSetsEveryKey(t *testing.T) {
	optional := map[string]bool{"defaults.mesh_shape": true, "system.placement": true, "system.faults": true}
	var doc yaml.Node
	if err := yaml.Unmarshal(DefaultYAML(), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(r *rule, n *yaml.Node, path string)
	walk = func(r *rule, n *yaml.Node, path string) {
		for _, f := range r.fields {
			p := join(path, f.key)
			v := lookup(n, f.key)
			switch {
			case v == nil && !optional[p]:
				t.Errorf("default.yaml does not set %s", p)
			case v != nil && optional[p]:
				t.Errorf("default.yaml sets optional key %s", p)
			case v != nil && f.rule.fields != nil:
				walk(f.rule, v, p)
			}
		}
	}
	r := rootRule(&Config{Algorithms: map[string]*Algorithm{}})
	for _, section := range []string{"defaults", "system"} {
		walk(r.field(section).rule, lookup(doc.Content[0], section), section)
	}
}

func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func TestDefault(t *testing.T) {
	c := Default()
	if c.File != DefaultName {
		t.Errorf("File = %q, want %q", c.File, DefaultName)
	}
	// Every shipped entry names a module that exists, and the default
	// algorithm is one of them.
	if _, ok := c.Algorithms[c.Defaults.Algorithm]; !ok {
		t.Errorf("defaults.algorithm %q has no entry", c.Defaults.Algorithm)
	}
	for _, name := range c.AlgorithmNames {
		if _, err := os.Stat(filepath.Join("..", "..", c.Algorithms[name].Module)); err != nil {
			t.Errorf("algorithms.%s.module: %v", name, err)
		}
	}
	s, err := c.Settings(c.Defaults.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c.Defaults, s); diff != "" {
		t.Errorf("Settings of the default algorithm differ from Defaults (-want +got):\n%s", diff)
	}
	// Load of the same bytes gives the same config.
	loaded, err := Load(DefaultName, DefaultYAML(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, loaded, cmpConfig...); diff != "" {
		t.Errorf("Load(default.yaml) differs from Default() (-want +got):\n%s", diff)
	}
	// Each call returns a fresh copy.
	c.Defaults.WorldSize = 99
	c.Algorithms["ring_allreduce"].Params["x"] = int64(1)
	c2 := Default()
	if c2.Defaults.WorldSize == 99 || len(c2.Algorithms["ring_allreduce"].Params) != 0 {
		t.Error("Default() returned shared state")
	}
}
