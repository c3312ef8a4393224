package msccl

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseGenerated(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/msccl/*.xml")
	if len(files) == 0 {
		t.Fatal("no files")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Parse(filepath.Base(f), data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		t.Logf("%s: %s %s ngpus %d chunks %d", f, a.Name, a.Coll, a.NGPUs, a.NChunksPerLoop)
	}
}
