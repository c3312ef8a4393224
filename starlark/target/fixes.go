package target

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/starlark/report"
	"kernbench/starlark/tl"
)

// Settings that make room, tried before they are named. A run of a .star
// algorithm can stop for want of memory that a setting, not the code,
// decides: its rx rings do not fit where buffer_kind puts them
// (machine.RingFitError), or a fused primitive finds no room for its
// staging slots, n_slots + 2 slots of slot_size each (tl.ErrNoStagingRoom).
// Which smaller setting works depends on what the kernel allocates besides,
// which only a run shows: the rings may fit with fewer slots and the staging
// then not. So kernbench runs the failed size again with each candidate —
// the rings in HBM, the largest n_slots, slot_size and channels below the
// current ones that fit — and names in the error only those with which the
// run completes. The tried runs print nothing and write no output.

// maxFixTrials bounds the runs one failure may try per setting: each
// candidate after the first halves the one before it.
const maxFixTrials = 4

// fixCandidate is one setting to try: defaults key and its values, best
// first (the first that runs is named).
type fixCandidate struct {
	key    string
	values []any
	apply  func(set *config.Settings, v any)
}

// MemoryFixes ends the message of a run that stopped for want of rx-ring
// or staging memory with the settings that run it, each tried with trial
// (a run of the same size with the changed target). Other errors are
// returned as they are.
func MemoryFixes(err error, cfg *config.Config, tgt *Target, opts Given, trial func(*Target) error) error {
	var f *report.Failure
	if !errors.As(err, &f) {
		return err
	}
	var rf *machine.RingFitError
	ringFit := errors.As(err, &rf)
	if !ringFit && !errors.Is(err, tl.ErrNoStagingRoom) {
		return err
	}
	set := tgt.Settings
	var cands []fixCandidate
	rings, kindErr := machine.ParseSpace(set.BufferKind)
	if kindErr != nil {
		return err
	}
	// The rings make room by moving only out of the memory that is short:
	// the staging is in tgt.Staging (TCM unless an MSCCL schedule moved it).
	staging := tgt.Staging
	if staging == 0 {
		staging = machine.TCM
	}
	if rings != machine.HBM && (ringFit || rings == staging) {
		cands = append(cands, fixCandidate{key: "buffer_kind", values: []any{"hbm"},
			apply: func(s *config.Settings, v any) { s.BufferKind = v.(string) }})
	}
	nSlots, slotSize := set.NSlots, set.SlotSize
	if ringFit {
		// The largest values with which this rank's rings would fit; the
		// kernel's own allocations may need smaller ones.
		perDir := rf.Free / int64(max(1, rf.Dirs))
		nSlots = int(min(int64(set.NSlots-1), perDir/max(1, set.SlotSize)))
		slotSize = min(set.SlotSize-1, perDir/int64(max(1, set.NSlots)))
	} else {
		nSlots, slotSize = set.NSlots/2, set.SlotSize-1
	}
	if ns := halvings(int64(nSlots), 1); len(ns) > 0 {
		cands = append(cands, fixCandidate{key: "n_slots", values: ns,
			apply: func(s *config.Settings, v any) { s.NSlots = int(v.(int64)) }})
	}
	// Slot sizes are powers of two (of at least 64 bytes, a multiple of
	// every element size).
	if slotSize >= 64 {
		pow := int64(1) << (bits.Len64(uint64(slotSize)) - 1)
		if ss := halvings(pow, 64); len(ss) > 0 {
			cands = append(cands, fixCandidate{key: "slot_size", values: ss,
				apply: func(s *config.Settings, v any) { s.SlotSize = v.(int64) }})
		}
	}
	if ringFit && set.Channels > 1 {
		cands = append(cands, fixCandidate{key: "channels", values: halvings(int64(set.Channels/2), 1),
			apply: func(s *config.Settings, v any) { s.Channels = int(v.(int64)) }})
	}
	var works, tried []string
	for _, c := range cands {
		for _, v := range c.values {
			t := *tgt
			c.apply(&t.Settings, v)
			if trial(&t) == nil {
				works = append(works, settingHint(cfg, tgt, opts, c.key, v))
				break
			}
			tried = append(tried, fmt.Sprintf("%s=%v", c.key, v))
		}
	}
	switch {
	case len(works) > 0:
		f.Msg += "; with any one of these settings this size runs (each was tried): " + strings.Join(works, ", ")
	case len(tried) > 0:
		f.Msg += "; no setting kernbench tried runs this size (" + strings.Join(tried, ", ") + ")"
	}
	return f
}

// halvings are from, from/2, … down to lo, at most maxFixTrials of them.
func halvings(from, lo int64) []any {
	var out []any
	for v := from; v >= lo && len(out) < maxFixTrials; v /= 2 {
		out = append(out, v)
	}
	return out
}

// settingHint is how the user gives defaults key = value to tgt's run: a
// --set of the defaults key, or of the algorithm's entry when the entry
// sets the key itself (it wins over defaults), or an item of
// run_kernel_in_mock's set= list; it names the item of the user's own that
// it replaces.
func settingHint(cfg *config.Config, tgt *Target, opts Given, key string, value any) string {
	path := "defaults." + key
	if tgt.Entry != nil && slices.Contains(tgt.Entry.OverrideKeys, key) {
		path = "algorithms." + tgt.Entry.Name + "." + key
	}
	s, replaced := SetHint(path, value, opts.Items(), opts.Keywords)
	if pos, ok := cfg.DefaultsGiven[key]; !replaced && ok && path == "defaults."+key && !strings.HasPrefix(pos, "--set ") {
		s += " (in place of " + pos + ")"
	}
	return s
}

// SetHint is the --set (a run_kernel_in_mock set= item with keywords)
// that gives path the value, naming the user's own item for path that it
// replaces (replaced).
func SetHint(path string, value any, items []SetItem, keywords bool) (hint string, replaced bool) {
	hint = fmt.Sprintf("--set %s=%v", path, value)
	if keywords {
		hint = fmt.Sprintf("set item %q", fmt.Sprintf("%s=%v", path, value))
	}
	for i := len(items) - 1; i >= 0; i-- {
		if strings.Join(items[i].Path, ".") == path {
			return hint + " (in place of " + items[i].String() + ")", true
		}
	}
	return hint, false
}

// SettingGiven names where the setting key in force for t came from, as
// DescribeGiven does: t's entry's own value (algorithms.NAME.KEY) before
// defaults:; false when only the embedded default gives it.
func (t *Target) SettingGiven(cfg *config.Config, key string, items []SetItem) (string, bool) {
	pos, ok := cfg.DefaultsGiven[key]
	if t.Entry != nil && t.Entry.OverridePos[key] != "" {
		pos, ok = t.Entry.OverridePos[key], true
	}
	if !ok {
		return "", false
	}
	return DescribeGiven(pos, items), true
}

// DescribeGiven names where the user gave a defaults key: the --set or
// --vary item, or the file and line.
func DescribeGiven(pos string, items []SetItem) string {
	if item, ok := strings.CutPrefix(pos, "--set "); ok {
		for i := len(items) - 1; i >= 0; i-- {
			if items[i].Item == item {
				return items[i].String()
			}
		}
	}
	return pos
}
