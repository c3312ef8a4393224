package script_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/script"
)

// secret is what a file outside the script's folder holds: no message may
// quote it.
const secret = "AKIAIOSFODNN7EXAMPLE"

// Rule (reliability round 3, item 2): load() reads only .star files, and
// only under the script's folder tree (links resolved), the --load-path
// folders, the algorithms folders and the embedded library; anything else
// is refused with the load statement's position and why, and nothing of
// the file is read, let alone shown.
func TestLoadConfined(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"work/ok.star":            "x = 'ok'\n",
		"work/sub/deep.star":      "load('../ok.star', y = 'x')\nx = y\n",
		"work/notes.txt":          secret + "\n",
		"outside/lib.star":        "x = 'outside'\n",
		"outside/secret.star":     "x = " + secret + "\n",
		"outside/creds":           "[default]\naws_access_key_id = " + secret + "\n",
		"shared/common.star":      "x = 'shared'\n",
		"algorithms/helpers.star": "x = 'helpers'\n",
	})
	for _, l := range [][2]string{
		{"work/in.star", "ok.star"},                    // a link inside the tree
		{"work/out.star", "../outside/secret.star"},    // a link out of it
		{"work/outdir", "../outside"},                  // a folder link out of it
		{"work/creds.star", "../outside/creds"},        // a non-.star file behind a .star name
		{"work/shared", "../shared"},                   // a folder link to a --load-path folder
		{"work/dangling.star", "../outside/gone.star"}, // nothing behind it
	} {
		if err := os.Symlink(l[1], filepath.Join(root, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	emb := fstest.MapFS{"lib/embedded.star": {Data: []byte("x = 'embedded'\n")}}
	for _, c := range []struct {
		name, module string
		loadPath     []string
		want         string // the value of x, or a fragment of the error
	}{
		{"sibling", "ok.star", nil, "ok"},
		{"subfolder loading its parent", "sub/deep.star", nil, "ok"},
		{"link inside the tree", "in.star", nil, "ok"},
		{"algorithms folder", "helpers.star", nil, "helpers"},
		{"embedded library", "embedded.star", nil, "embedded"},
		{"--load-path, by name", "common.star", []string{"shared"}, "shared"},
		{"--load-path, through a folder link", "shared/common.star", []string{"shared"}, "shared"},
		{"dotdot", "../outside/lib.star", nil, "main.star:1:1: refused: outside/lib.star is outside the script's folder work/, the algorithms folder algorithms/ and the shipped library (nothing of it was read)"},
		{"absolute", filepath.Join(root, "outside", "lib.star"), nil, "is outside the script's folder work/"},
		{"link to a file outside", "out.star", nil, "work/out.star (which leads to " + filepath.Join(root, "outside", "secret.star") + ") is outside"},
		{"link to a folder outside", "outdir/lib.star", nil, "(which leads to " + filepath.Join(root, "outside", "lib.star") + ") is outside"},
		{"link to a non-.star file outside", "creds.star", nil, "is outside"},
		{"a folder link to --load-path without it", "shared/common.star", nil, "is outside"},
		{"not .star, inside the tree", "notes.txt", nil, "main.star:1:1: refused: load() reads .star files only, and notes.txt is not one (nothing of it was read)"},
		{"not .star, outside", "../outside/creds", nil, "load() reads .star files only"},
		{"dangling link", "dangling.star", nil, "work/dangling.star: no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := script.Env{Dir: root}
			src := script.Source{Env: env, Embedded: emb, Overlay: map[string][]byte{
				"work/main.star": []byte("load(" + strings.ReplaceAll(quote(c.module), "\\", "\\\\") + ", 'x')\nX = x\n"),
			}}
			l := &script.Loader{Src: src, Search: "algorithms", Fallback: "lib", LoadPath: c.loadPath}
			// The overlay's main.star stands for a file of work/: its
			// folder tree is the script's.
			if _, err := l.Load("work/ok.star"); err != nil {
				t.Fatal(err)
			}
			g, err := l.Load("work/main.star")
			got := ""
			if err != nil {
				got = script.Format(err)
			} else {
				got = str(t, g, "X")
			}
			if strings.Contains(got, secret) {
				t.Errorf("the message quotes the file:\n%s", got)
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("load(%q): got\n%s\nwant it to contain\n%s", c.module, got, c.want)
			}
		})
	}
}

func quote(s string) string { return "'" + s + "'" }

// A file whose name does not end in .star and that is not Starlark, given
// as the script itself, fails without a word of its content: Starlark's
// own messages quote identifiers and strings. A .star file keeps them.
func TestNotStarlarkQuotesNothing(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"credentials":      "[default]\naws_access_key_id = " + secret + "\n",
		"key.pem":          "-----BEGIN KEY-----\n" + secret + "\n",
		"literal":          "x = '" + secret + "' + 1\n",
		"credentials.star": "aws_access_key_id = " + secret + "\n",
	})
	type verdict struct {
		Quotes bool
		Says   string
	}
	for _, c := range []struct {
		file string
		want verdict
	}{
		{"credentials", verdict{false, "credentials: not a Starlark file: its name does not end in .star and it does not resolve as Starlark"}},
		{"key.pem", verdict{false, "key.pem: not a Starlark file: its name does not end in .star and it does not parse as Starlark"}},
		{"literal", verdict{false, "literal: not a Starlark file: its name does not end in .star and it fails while running as Starlark"}},
		{"credentials.star", verdict{true, "credentials.star:1:21: undefined: " + secret}},
	} {
		l := &script.Loader{Src: script.Source{Env: script.Env{Dir: dir}}}
		_, err := l.Load(c.file)
		if err == nil {
			t.Fatalf("%s loaded", c.file)
		}
		msg := script.Format(err)
		got := verdict{strings.Contains(msg, secret), c.want.Says}
		if !strings.Contains(msg, c.want.Says) {
			got.Says = msg
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.file, diff)
		}
	}
}
