package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"kernbench/engine/spelling"
)

// Error is a ccl.yaml decoding error.
type Error struct {
	// Pos is "FILE:LINE" for a mistake in the file, "FILE" when the YAML
	// parser gave no line, or "--set KEY=VALUE" for one introduced by a
	// --set item.
	Pos string
	// Msg says what is wrong, usually "key.path: got X, want Y".
	Msg string

	// order sorts the errors of one Load: --set items first, then by
	// file and line.
	set  bool
	file string
	line int
}

func (e *Error) Error() string { return e.Pos + ": " + e.Msg }

// Errors are every error one Load found, --set items first (in the
// order given), then in file order, one per line of Error(). Load
// returns a single error as its *Error.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the first *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// maxErrors bounds the errors one Load reports: past it, decoding stops
// (a file of another format would give one per line).
const maxErrors = 20

// maxNodes bounds the nodes one Load visits; YAML aliases can otherwise
// expand a small file into an exponential tree.
const maxNodes = 1 << 17

// decoder holds the state of one Load.
type decoder struct {
	name string
	// origin marks the nodes created by a --set item, with that item.
	origin map[*yaml.Node]string
	// from names the file of the nodes that come from another file than
	// name: the embedded default under a local ccl.yaml (LoadOverlay).
	from map[*yaml.Node]string
	// isDefault: the file decoded is the embedded default itself, or a
	// byte-for-byte copy of it, whose nodes are not the user's (given).
	isDefault bool
	budget    int
	// defaultAlgorithm is the node of defaults.algorithm, kept for the
	// check that it names an algorithm.
	defaultAlgorithm *yaml.Node
	// errs are the errors found so far: decoding goes on past a bad key
	// or value to report every one (see add).
	errs Errors
	// stop ends decoding: the node budget is spent.
	stop bool
	// selects are the entries of select:, checked against algorithms:
	// once both are decoded (Config.checkSelect).
	selects []selectNodes
}

// add records err, a mistake decoding continues past.
func (d *decoder) add(err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Pos: d.name, Msg: err.Error(), file: d.name}
	}
	d.errs = append(d.errs, e)
}

// stopped reports whether decoding must not go on: the node budget is
// spent or maxErrors errors were found.
func (d *decoder) stopped() bool {
	return d.stop || len(d.errs) >= maxErrors
}

// err is the error of the Load: nil, the one *Error, or every one in
// order (Errors).
func (d *decoder) err() error {
	switch len(d.errs) {
	case 0:
		return nil
	case 1:
		return d.errs[0]
	}
	es := slices.Clone(d.errs)
	slices.SortStableFunc(es, func(a, b *Error) int {
		switch {
		case a.set != b.set:
			if a.set {
				return -1
			}
			return 1
		case a.set:
			return 0 // in the order the items were given
		case a.file != b.file:
			return strings.Compare(a.file, b.file)
		}
		return a.line - b.line
	})
	if d.stopped() && !d.stop {
		es = append(es, &Error{Pos: d.name, Msg: fmt.Sprintf("more errors may follow: decoding stopped after %d", maxErrors)})
	}
	return es
}

// given reports whether the user gave n or a node below it: a --set item,
// or a file other than the embedded default (a mapping of the default
// may hold keys a local ccl.yaml merged into it).
func (d *decoder) given(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if _, ok := d.origin[n]; ok {
		return true
	}
	if !d.isDefault && d.from[n] == "" {
		return true
	}
	for _, c := range n.Content {
		if d.given(c) {
			return true
		}
	}
	return false
}

// givenAt is where the user gave n (given): its own position, or that of
// the first node below it that the user gave.
func (d *decoder) givenAt(n *yaml.Node) string {
	_, set := d.origin[n]
	if set || !d.isDefault && d.from[n] == "" {
		return d.pos(n)
	}
	for _, c := range n.Content {
		if d.given(c) {
			return d.givenAt(c)
		}
	}
	return d.pos(n)
}

// pos returns where n came from.
func (d *decoder) pos(n *yaml.Node) string {
	if label, ok := d.origin[n]; ok {
		return label // "--set ITEM" or "--vary ITEM"
	}
	name := d.name
	if f, ok := d.from[n]; ok {
		name = f
	}
	if n == nil || n.Line == 0 {
		return name
	}
	return name + ":" + strconv.Itoa(n.Line)
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) error {
	e := &Error{Pos: d.pos(n), Msg: fmt.Sprintf(format, args...), file: d.name}
	if _, ok := d.origin[n]; ok {
		e.set = true
	} else if n != nil {
		e.line = n.Line
		if f, ok := d.from[n]; ok {
			e.file = f
		}
	}
	return e
}

// resolve follows aliases and charges n against the node budget.
func (d *decoder) resolve(n *yaml.Node) (*yaml.Node, error) {
	for depth := 0; n.Kind == yaml.AliasNode; depth++ {
		if n.Alias == nil || depth > 100 {
			return nil, d.errorf(n, "bad alias *%s", n.Value)
		}
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		d.stop = true
		return nil, d.errorf(n, "document too large (more than %d nodes after expanding aliases)", maxNodes)
	}
	return n, nil
}

// A rule is one node of the schema. It decodes a YAML node into the target
// it was built for; for mappings it also tells which keys exist, which is how
// --set paths are checked.
type rule struct {
	// fields: a mapping with exactly these keys (decoded in this order).
	fields []field
	// entry: a mapping whose keys are names chosen by the user; entry
	// returns the rule of the value under key (k is nil when only the
	// shape is wanted, for --set path checks).
	entry func(d *decoder, key string, k *yaml.Node) (*rule, error)
	// open: any value, any key path below (params).
	open bool
	// leaf decodes a scalar or sequence, or an open value.
	leaf func(d *decoder, n *yaml.Node, path string) error
	// onKey is called with every key present in a fields mapping, the
	// node of the key and that of its value.
	onKey func(d *decoder, key string, k, v *yaml.Node)
	// after runs once the mapping's keys are decoded; k is the key node
	// of the mapping (nil at the top level), v the mapping. It does not
	// run after a mistake below the mapping (it would report its
	// consequences) unless afterMistakes is set.
	after         func(d *decoder, k, v *yaml.Node, path string) error
	afterMistakes bool
}

type field struct {
	key      string
	required bool
	rule     *rule
	// missing, if set, follows "PATH.KEY is required": what to give
	// (path is the mapping's, e.g. algorithms.mine).
	missing func(path string) string
}

func (r *rule) field(key string) *field {
	for i := range r.fields {
		if r.fields[i].key == key {
			return &r.fields[i]
		}
	}
	return nil
}

func (r *rule) allowed() string {
	return strings.Join(r.keys(), ", ")
}

// keys are the keys of r's fields, sorted.
func (r *rule) keys() []string {
	keys := make([]string, len(r.fields))
	for i, f := range r.fields {
		keys[i] = f.key
	}
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decode decodes v, the value under key node k (nil at the top), by r. It
// records what is wrong (add) and goes on with the other keys, so that one
// Load reports every mistake.
func (d *decoder) decode(r *rule, k, v *yaml.Node, path string) {
	if d.stopped() {
		return
	}
	v, err := d.resolve(v)
	if err != nil {
		d.add(err)
		return
	}
	if r.fields == nil && r.entry == nil {
		if err := r.leaf(d, v, path); err != nil {
			d.add(err)
		}
		return
	}
	before := len(d.errs)
	pairs, ok := d.pairs(v, path)
	if !ok {
		return
	}
	if r.entry != nil {
		for _, p := range pairs {
			er, err := r.entry(d, p.key, p.k)
			if err != nil {
				d.add(err)
				continue
			}
			d.decode(er, p.k, p.v, join(path, p.key))
		}
	} else {
		byKey := make(map[string]pair, len(pairs))
		for _, p := range pairs {
			if r.field(p.key) == nil {
				hint := spelling.Hint(p.key, r.keys())
				if df := r.field("defaults"); path == "" && hint == "" && df != nil && df.rule.field(p.key) != nil {
					// world_size: 4 at the top: the run settings are
					// under defaults:.
					hint = fmt.Sprintf("; did you mean defaults.%s (under defaults:)?", p.key)
				}
				d.add(d.errorf(p.k, "%s: unknown key %q (allowed: %s)%s", pathOrTop(path), p.key, r.allowed(), hint))
				continue
			}
			byKey[p.key] = p
			if r.onKey != nil {
				r.onKey(d, p.key, p.k, p.v)
			}
		}
		for _, f := range r.fields {
			p, ok := byKey[f.key]
			if !ok {
				if f.required {
					at := k
					if at == nil {
						at = v
					}
					more := ""
					if f.missing != nil {
						more = f.missing(path)
					}
					d.add(d.errorf(at, "%s is required%s", join(path, f.key), more))
				}
				continue
			}
			d.decode(f.rule, p.k, p.v, join(path, f.key))
		}
	}
	if r.after != nil && (len(d.errs) == before || r.afterMistakes) && !d.stopped() {
		if err := r.after(d, k, v, path); err != nil {
			d.add(err)
		}
	}
}

// pairs is mapping for decode: every problem with a key is recorded and
// the key left out; ok is false when v is no mapping at all.
func (d *decoder) pairs(v *yaml.Node, path string) (_ []pair, ok bool) {
	if isNull(v) {
		return nil, true
	}
	if v.Kind != yaml.MappingNode {
		d.add(d.errorf(v, "%s: got %s, want mapping", pathOrTop(path), describe(v)))
		return nil, false
	}
	pairs := make([]pair, 0, len(v.Content)/2)
	first := make(map[string]*yaml.Node, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		kn, err := d.resolve(v.Content[i])
		if err != nil {
			d.add(err)
			if d.stopped() {
				return nil, false
			}
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			d.add(d.errorf(kn, "%s: got %s as a key, want a string", pathOrTop(path), describe(kn)))
			continue
		}
		if prev, dup := first[kn.Value]; dup {
			d.add(d.errorf(kn, "%s: duplicate key %q (first at %s)", pathOrTop(path), kn.Value, d.pos(prev)))
			continue
		}
		first[kn.Value] = kn
		pairs = append(pairs, pair{key: kn.Value, k: kn, v: v.Content[i+1]})
	}
	return pairs, true
}

func pathOrTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

type pair struct {
	key  string
	k, v *yaml.Node
}

// mapping returns the key/value pairs of v in file order, rejecting
// duplicate and non-scalar keys. A null value is an empty mapping.
func (d *decoder) mapping(k, v *yaml.Node, path string) ([]pair, error) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, d.errorf(v, "%s: got %s, want mapping", pathOrTop(path), describe(v))
	}
	pairs := make([]pair, 0, len(v.Content)/2)
	first := make(map[string]*yaml.Node, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		kn, err := d.resolve(v.Content[i])
		if err != nil {
			return nil, err
		}
		if kn.Kind != yaml.ScalarNode {
			return nil, d.errorf(kn, "%s: got %s as a key, want a string", pathOrTop(path), describe(kn))
		}
		if prev, dup := first[kn.Value]; dup {
			return nil, d.errorf(kn, "%s: duplicate key %q (first at %s)", pathOrTop(path), kn.Value, d.pos(prev))
		}
		first[kn.Value] = kn
		pairs = append(pairs, pair{key: kn.Value, k: kn, v: v.Content[i+1]})
	}
	return pairs, nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's type and value for "got X" in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.ScalarNode:
	default:
		return "alias"
	}
	v := n.Value
	if utf8.RuneCountInString(v) > 40 {
		r := []rune(v)
		v = string(r[:40]) + "..."
	}
	switch tag := n.ShortTag(); tag {
	case "!!str":
		return strconv.Quote(v)
	case "!!null":
		return "null"
	case "!!int", "!!float", "!!bool":
		return v
	default:
		return strings.TrimPrefix(tag, "!!") + " " + strconv.Quote(v)
	}
}

// parse reads one YAML document. An empty input is an empty mapping.
func (d *decoder) parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || (err == nil && len(doc.Content) == 0) {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1, Column: 1}, nil
	}
	if err != nil {
		return nil, d.yamlError(err, data)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, d.yamlError(err, data)
		}
		return nil, d.errorf(&next, "want a single YAML document, found another")
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). The parser reports 0-based lines, the scanner 1-based ones, and
// both leave out line 0; yamlError corrects for that.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// yamlError turns a yaml.v3 syntax error into an *Error with the file name
// and a 1-based line. yaml.v3's syntax errors are untyped (text only), so
// this is the one place that reads error messages: a third-party library's,
// never kernbench's own (those are typed, see starlark/errkind).
func (d *decoder) yamlError(err error, data []byte) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	switch {
	case strings.HasPrefix(msg, "unknown anchor '"):
		// Raised after parsing, without a position: find the alias.
		name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		if i := bytes.Index(data, []byte("*"+name)); i >= 0 {
			line = 1 + bytes.Count(data[:i], []byte("\n"))
		}
	case strings.Contains(msg, "UTF-8") || strings.Contains(msg, "Unicode") ||
		strings.Contains(msg, "control characters"):
		// Reader errors carry a byte offset we cannot see; find the
		// offending byte ourselves.
		line = badCharLine(data)
	case slices.Contains(yamlParserProblems, msg):
		line++
	case msg == "found a tab character that violates indentation":
		// yaml.v3 names the line of the token before the tab.
		line = tabIndentLine(data, line)
	case line == 0:
		line = 1
	}
	if line == 0 {
		return &Error{Pos: d.name, Msg: msg}
	}
	if ls := strings.Split(string(data), "\n"); line <= len(ls) && strings.HasPrefix(ls[line-1], "\t") {
		// yaml.v3 says "found character that cannot start any token"
		// of a line indented with a tab, which an editor shows as spaces.
		msg += " (the line is indented with a tab: YAML indents with spaces)"
	}
	return &Error{Pos: d.name + ":" + strconv.Itoa(line), Msg: msg}
}

// tabIndentLine returns the first line at or after from whose indentation
// holds a tab (from when there is none).
func tabIndentLine(data []byte, from int) int {
	for i, l := range strings.Split(string(data), "\n") {
		if i+1 >= from && strings.Contains(l[:len(l)-len(strings.TrimLeft(l, " \t"))], "\t") {
			return i + 1
		}
	}
	return from
}

// badCharLine returns the line of the first byte that is not UTF-8 or is a
// control character YAML does not allow, or 0.
func badCharLine(data []byte) int {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line
		case r == '\n':
			line++
		case r < 0x20 && r != '\t' && r != '\r', r == 0x7f:
			return line
		}
		i += size
	}
	return 0
}

// applySet applies one --set item to the tree rooted at root, checking the
// key path against the schema r.
func (d *decoder) applySet(root *yaml.Node, r *rule, item string) error {
	// label is how messages name the item: "--set ITEM", or "--vary ITEM"
	// for an item given as "--vary key.path=value" (a comparison's
	// variant), which every position it gives then names.
	label := "--set " + item
	if rest, ok := strings.CutPrefix(item, "--vary "); ok {
		item, label = rest, "--vary "+rest
	}
	fail := func(format string, args ...any) error {
		return &Error{Pos: label, Msg: fmt.Sprintf(format, args...), set: true}
	}
	keyPath, value, ok := strings.Cut(item, "=")
	if !ok {
		return fail("missing \"=\", want key.path=value")
	}
	keyPath = strings.TrimSpace(keyPath)
	if keyPath == "" {
		return fail("missing key path before \"=\"")
	}
	keys := strings.Split(keyPath, ".")
	for _, k := range keys {
		if k == "" {
			return fail("empty key in path %q", keyPath)
		}
	}

	// Check the path against the schema before touching the tree.
	cur := r
check:
	for i, key := range keys {
		path := strings.Join(keys[:i], ".")
		switch {
		case cur.open:
			break check // anything goes below an open value
		case cur.fields != nil:
			f := cur.field(key)
			if f == nil {
				hint := spelling.Hint(key, cur.keys())
				if df := r.field("defaults"); i == 0 && hint == "" && df != nil && df.rule.field(key) != nil {
					// --vary world_size=4,8: the run settings are under
					// defaults.
					hint = fmt.Sprintf("; did you mean defaults.%s?", keyPath)
				}
				return fail("%s: unknown key %q (allowed: %s)%s", pathOrTop(path), key, cur.allowed(), hint)
			}
			cur = f.rule
		case cur.entry != nil:
			cur, _ = cur.entry(d, key, nil)
		default:
			return fail("%s is not a mapping, cannot set %q below it", path, key)
		}
	}

	val, err := parseSetValue(value)
	if err != nil {
		return fail("bad value: %v", err)
	}
	markTree(d.origin, val, label)

	// Walk the tree, creating the missing mappings.
	m := root
	for i, key := range keys {
		path := strings.Join(keys[:i+1], ".")
		last := i == len(keys)-1
		var slot *yaml.Node // the value under key, nil if missing
		for j := 0; j+1 < len(m.Content); j += 2 {
			if kn := m.Content[j]; kn.Kind == yaml.ScalarNode && kn.Value == key {
				slot = m.Content[j+1]
				switch {
				case last:
					m.Content[j+1] = val
				case slot.Kind == yaml.AliasNode && slot.Alias != nil:
					// Edit a copy so other uses of the anchor keep their value.
					slot = copyTree(slot.Alias)
					m.Content[j+1] = slot
				case isNull(slot):
					slot = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: slot.Line, Column: slot.Column}
					m.Content[j+1] = slot
				}
				break
			}
		}
		if last {
			if slot == nil {
				kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
				d.origin[kn] = label
				m.Content = append(m.Content, kn, val)
			}
			return nil
		}
		switch {
		case slot == nil:
			kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
			slot = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			d.origin[kn], d.origin[slot] = label, label
			m.Content = append(m.Content, kn, slot)
		case slot.Kind != yaml.MappingNode:
			return fail("%s: got %s at %s, want mapping", path, describe(slot), d.pos(slot))
		}
		m = slot
	}
	return nil
}

// parseSetValue parses the value of a --set item: one YAML scalar or flow
// collection.
func parseSetValue(value string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(value))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || (err == nil && len(doc.Content) == 0) {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}, nil
	}
	if err != nil {
		return nil, errors.New(yamlMessage(err))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("want a single YAML value")
	}
	n := doc.Content[0]
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return nil, errors.New("anchors and aliases are not allowed")
	}
	if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle == 0 {
		return nil, errors.New(`want a scalar, [a, sequence] or {a: mapping} (quote a string that contains ": " or starts with "- ")`)
	}
	return n, nil
}

// yamlMessage strips yaml.v3's "yaml: line N: " prefix.
func yamlMessage(err error) string {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return m[2]
	}
	return strings.TrimPrefix(msg, "yaml: ")
}

// markTree records every node of the tree at n as coming from item (its
// label: a file's name, or "--set ITEM").
func markTree(origin map[*yaml.Node]string, n *yaml.Node, item string) {
	origin[n] = item
	for _, c := range n.Content {
		markTree(origin, c, item)
	}
}

// copyTree copies the nodes of a tree; aliases inside still point at their
// anchors.
func copyTree(n *yaml.Node) *yaml.Node {
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		c.Content[i] = copyTree(e)
	}
	return &c
}
