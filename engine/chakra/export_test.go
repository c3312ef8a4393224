package chakra_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/engine/chakra"
	"kernbench/starlark/ccl"
	"kernbench/starlark/report"
)

// networkOnly makes memory ports, math and the IPCQ's per-send overhead
// (the kernel's, before the message leaves) cost nothing, so a run's
// time is its network's: what the model of the exported graph computes.
var networkOnly = []string{"defaults.ipcq_overhead_ns=0",
	"system.memory.tcm.bandwidth_gbps=1000000", "system.memory.tcm.latency_ns=0",
	"system.memory.sram.bandwidth_gbps=1000000", "system.memory.sram.latency_ns=0",
	"system.memory.hbm.bandwidth_gbps=1000000", "system.memory.hbm.latency_ns=0",
	"system.math.bytes_per_ns=1000000", "system.math.latency_ns=0",
}

// exported runs algo at world ranks and count elements with
// --export-chakra and --oplog: the report, the files decoded by the
// schema and the op_log.
func exported(t *testing.T, algo string, world int, count int64, sets []string) (*report.Report, *chakra.Trace, []*chakra.File, netCfg, []map[string]any) {
	t.Helper()
	var tr *chakra.Trace
	var oplog bytes.Buffer
	rep, err := ccl.Run(algo, ccl.Options{Embedded: kernbench.Files, Verify: true, WorldSize: world, Counts: []int64{count}, Sets: sets,
		OpLog: &oplog, ExportChakra: func(x *chakra.Trace) { tr = x }})
	if err != nil {
		t.Fatalf("%s: %v", algo, err)
	}
	if r := rep.Results[0]; !r.Verified || r.Wrong != 0 {
		t.Fatalf("%s: the run is not correct (%d wrong)", algo, r.Wrong)
	}
	if tr == nil {
		t.Fatalf("%s: no trace exported", algo)
	}
	files, err := tr.Files()
	if err != nil {
		t.Fatal(err)
	}
	var ets []*chakra.File
	var nw netCfg
	for _, f := range files {
		switch {
		case strings.HasSuffix(f.Name, ".et"):
			want := fmt.Sprintf("%s.%d.et", algo, len(ets))
			if f.Name != want {
				t.Fatalf("file %d is %s, want %s", len(ets), f.Name, want)
			}
			d, err := chakra.Decode(f.Data)
			if err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			ets = append(ets, d)
		case f.Name == chakra.NetworkFile:
			if nw, err = parseNetwork(f.Data); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(f.Name, ".json"):
			var v map[string]any
			if err := json.Unmarshal(f.Data, &v); err != nil {
				t.Errorf("%s is not JSON: %v", f.Name, err)
			}
		}
	}
	if len(ets) != world || nw.npus != world {
		t.Fatalf("%d ET files and a network of %d NPUs for %d ranks", len(ets), nw.npus, world)
	}
	var recs []map[string]any
	sc := bufio.NewScanner(&oplog)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, m)
	}
	return rep, tr, ets, nw, recs
}

// The files decode with the schema; each rank's file is its metadata node
// then nodes numbered 1, 2, ... whose dependencies point at earlier ones
// of the same file (so the graph has no cycle); every send has its
// receive, of its size; and per rank the bytes sent and received are the
// op_log's, the messages kernbench's op counts.
func TestExportMatchesRun(t *testing.T) {
	for _, c := range []struct {
		algo  string
		world int
		count int64
	}{
		{"ring_allreduce", 8, 16384},
		{"ring_allreduce_bidir", 4, 4096},
		{"tree_allreduce", 7, 3000},
		{"alltoall", 4, 1024},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.algo, c.world), func(t *testing.T) {
			rep, _, files, _, recs := exported(t, c.algo, c.world, c.count, nil)
			type io struct{ SendBytes, RecvBytes, Sends, Recvs int64 }
			got, want := make([]io, c.world), make([]io, c.world)
			for _, r := range recs {
				if r["kind"] != "ipcq" {
					continue
				}
				rank, n := int(r["rank"].(float64)), int64(r["nbytes"].(float64))
				if r["name"] == "send" {
					want[rank].SendBytes += n
					want[rank].Sends++
				} else {
					want[rank].RecvBytes += n
					want[rank].Recvs++
				}
			}
			type msg struct {
				src, dst int
				tag      int64
			}
			sends, recvs := map[msg]int64{}, map[msg]int64{}
			var sendTotal, recvTotal int64
			for rank, f := range files {
				if f.Version != chakra.Version {
					t.Errorf("rank %d: version %q", rank, f.Version)
				}
				if len(f.Nodes) == 0 || f.Nodes[0].Type != chakra.MetadataNode {
					t.Fatalf("rank %d: no metadata node first", rank)
				}
				for i, n := range f.Nodes {
					if n.ID != uint64(i) {
						t.Fatalf("rank %d: node %d has id %d", rank, i, n.ID)
					}
					for _, d := range n.DataDeps {
						if d >= n.ID {
							t.Fatalf("rank %d: node %d (%s) depends on node %d, not an earlier one", rank, n.ID, n.Name, d)
						}
					}
					if v, ok := n.Attr("is_cpu_op"); !ok || v != false {
						t.Errorf("rank %d: node %d: is_cpu_op = %v, want false", rank, n.ID, v)
					}
					src, _ := n.Int("comm_src")
					dst, _ := n.Int("comm_dst")
					tag, _ := n.Int("comm_tag")
					size, _ := n.Int("comm_size")
					switch n.Type {
					case chakra.CommSendNode:
						if int(src) != rank {
							t.Errorf("rank %d: send %d from rank %d", rank, n.ID, src)
						}
						sends[msg{int(src), int(dst), tag}] = size
						got[rank].SendBytes += size
						got[rank].Sends++
						sendTotal++
					case chakra.CommRecvNode:
						if int(dst) != rank {
							t.Errorf("rank %d: receive %d to rank %d", rank, n.ID, dst)
						}
						recvs[msg{int(src), int(dst), tag}] = size
						got[rank].RecvBytes += size
						got[rank].Recvs++
						recvTotal++
					}
				}
			}
			if d := cmp.Diff(sends, recvs, cmp.AllowUnexported(msg{})); d != "" {
				t.Errorf("sends (-) and receives (+) do not pair up:\n%s", d)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("per rank, the op_log's (-) and the files' (+) messages differ:\n%s", d)
			}
			if ops := rep.Results[0].Ops; ops.Send != sendTotal || ops.Recv != recvTotal {
				t.Errorf("%d sends and %d receives in the files, the run counts %d and %d", sendTotal, recvTotal, ops.Send, ops.Recv)
			}
		})
	}
}

// With memory, math and IPCQ overhead made free, kernbench's time is the
// network's, and the cut-through model of the exported graph over the
// exported network gives it within 2 %: a ring allreduce at 8 ranks (a
// Ring) and recursive halving-doubling at 1 MiB (a Switch). The figures,
// and what the same model gives run as ASTRA-sim runs it
// (store-and-forward, one send per rank at a time, sends ending on
// arrival, 1 ns per COMP node), are those of docs/astra-sim.md (go test
// -v -run TestModelReproducesNetworkTime ./engine/chakra).
func TestModelReproducesNetworkTime(t *testing.T) {
	// Paths of 200 ns, where the dependencies set the time (the pipeline
	// fills step by step), with rings deep enough that credits, which
	// the graph does not carry, never hold a send.
	slow := append(slices.Clone(networkOnly), "system.links.pe_noc.latency_ns=100", "defaults.n_slots=64")
	for _, c := range []struct {
		name  string
		algo  string
		sets  []string
		count int64
		check bool
	}{
		{"network only, 64 KiB", "ring_allreduce", networkOnly, 16384, true},
		{"network only, 256 KiB", "ring_allreduce", networkOnly, 65536, true},
		{"network only, 1 MiB", "ring_allreduce", networkOnly, 262144, true},
		{"network only, 200 ns paths, 64 KiB", "ring_allreduce", slow, 16384, true},
		{"default machine, 64 KiB", "ring_allreduce", nil, 16384, false},
		{"default machine, 1 MiB", "ring_allreduce", nil, 262144, false},
		{"network only, 1 MiB", "rd_allreduce", networkOnly, 262144, true},
		{"network only, 64 KiB", "rd_allreduce", networkOnly, 16384, false},
		{"network only, 64 KiB", "alltoall", networkOnly, 16384, false},
	} {
		t.Run(c.algo+"/"+c.name, func(t *testing.T) {
			rep, tr, files, nw, _ := exported(t, c.algo, 8, c.count, c.sets)
			if !tr.Network.Exact {
				t.Fatalf("network %+v, want an exact one", tr.Network)
			}
			kb := rep.Results[0].SimTimeNs
			cut, err := simulate(files, nw, modelOpts{})
			if err != nil {
				t.Fatal(err)
			}
			saf, err := simulate(files, nw, modelOpts{storeAndForward: true})
			if err != nil {
				t.Fatal(err)
			}
			astra, err := simulate(files, nw, modelOpts{storeAndForward: true, oneSend: true, compNs: 1})
			if err != nil {
				t.Fatal(err)
			}
			// The same graph without its dependencies: every message
			// leaves at once, which is what the dependencies prevent.
			var loose []*chakra.File
			for _, f := range files {
				g := *f
				g.Nodes = slices.Clone(f.Nodes)
				for i := range g.Nodes {
					g.Nodes[i].DataDeps = nil
				}
				loose = append(loose, &g)
			}
			free, err := simulate(loose, nw, modelOpts{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, 8 ranks, %s, %d bytes: kernbench %.1f ns; model cut-through %.1f ns (%+.2f %%; without the dependencies %.1f ns), store-and-forward %.1f ns, as ASTRA-sim runs it %.1f ns (%+.1f %%)",
				c.algo, nw.topology, c.count*4, kb, cut, 100*(cut/kb-1), free, saf, astra, 100*(astra/kb-1))
			if c.check && math.Abs(cut/kb-1) > 0.02 {
				t.Errorf("model %.1f ns, kernbench %.1f ns: more than 2 %% apart", cut, kb)
			}
		})
	}
}
