package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/engine/dtype"
	"kernbench/engine/oplog"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
)

// Every field that --json, --jsonl, --csv and --oplog write is named in
// docs/report.md as `name`: the report's, a row's (with -v's parts), a
// comparison's label, the CSV header's and an op_log record's. ops, time,
// wall_s, the CSV columns and every op_log field were documented nowhere.
func TestReportDocNamesEveryField(t *testing.T) {
	doc, err := os.ReadFile("../../docs/report.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range []any{report.Report{}, report.Result{}, report.TimeSummary{}, report.TimeSplit{},
		report.OpCounts{}, report.Usage{}, report.ClassUsage{}, report.InterpCounts{}, report.OpLogCost{},
		report.FaultUse{}, report.WrongElem{}, report.RankWrong{}, report.WrongRange{}, report.Disconnected{},
		hostmem.Estimate{}, compare.Report{}, compare.Row{}} {
		names = append(names, jsonNames(reflect.TypeOf(v))...)
	}

	var b bytes.Buffer
	if err := compare.CSV(&b, nil); err != nil {
		t.Fatal(err)
	}
	header, err := csv.NewReader(&b).Read()
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, header...)

	// An op_log record with every field set, so that none is left out.
	rec := &oplog.Record{Seq: 1, Rank: 1, Kind: oplog.KindMemory, SrcSp: oplog.SpaceTCM, DstSp: oplog.SpaceHBM,
		RecvMode: oplog.ReturnSlot, DType: dtype.F32, OutType: dtype.F32, Left: true, Name: "fetch", TStart: 1, TEnd: 2,
		Src: 1, Dst: 1, NBytes: 4, Count: 1, Dir: "E", SenderSeq: 1, TileOut: 1, TileA: 1, TileB: 1, Op: "add",
		Scalar: 1, ScalarI: 1, Data: []byte{1}, Args: map[string]string{"k": "v"}}
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(line, &fields); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		names = append(names, k)
	}

	slices.Sort(names)
	var missing []string
	for _, n := range slices.Compact(names) {
		if !bytes.Contains(doc, []byte("`"+n+"`")) {
			missing = append(missing, n)
		}
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("fields docs/report.md does not name (-want +got):\n%s", diff)
	}
}

// jsonNames are the JSON names of t's fields (a struct or a pointer to
// one), those of embedded structs included.
func jsonNames(t reflect.Type) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
