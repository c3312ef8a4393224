package chakra

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
)

// OutFile is one file of the export: its name in the folder and content.
type OutFile struct {
	Name string
	Data []byte
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Prefix is the ET files' name before .RANK.et: the algorithm's name
// when it is a plain one, else "kernbench".
func (t *Trace) Prefix() string {
	if plainName.MatchString(t.Run.Algorithm) {
		return t.Run.Algorithm
	}
	return "kernbench"
}

// The files beside the ET files.
const (
	NetworkFile = "network.yml"
	SystemFile  = "system.json"
	MemoryFile  = "remote_memory.json"
	ReadmeFile  = "README.md"
)

// num writes a figure the way the configuration files want it: the
// shortest decimal that reads back as the same float, with a point.
func num(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !bytes.ContainsAny([]byte(s), ".eE") {
		s += ".0"
	}
	return s
}

// Files are the export, in the order they are written: one ET file per
// rank, the network, system and remote-memory configurations ASTRA-sim's
// analytical backend reads, and a README saying how to run them.
func (t *Trace) Files() ([]OutFile, error) {
	var out []OutFile
	for rank, nodes := range t.Ranks {
		data, err := EncodeFile([]Attr{
			{"source", "kernbench run --export-chakra"},
			{"rank", int64(rank)},
		}, nodes)
		if err != nil {
			return nil, fmt.Errorf("--export-chakra: rank %d: %w", rank, err)
		}
		out = append(out, OutFile{fmt.Sprintf("%s.%d.et", t.Prefix(), rank), data})
	}
	nw := t.Network
	out = append(out, OutFile{NetworkFile, fmt.Appendf(nil,
		"# kernbench run --export-chakra: the links the run's messages used\n"+
			"topology: [ %s ]\nnpus_count: [ %d ]\nbandwidth: [ %s ]  # GB/s\nlatency: [ %s ]  # ns\n",
		nw.Topology, nw.NPUs, num(nw.GBps), num(nw.LatencyNs))})
	out = append(out, OutFile{SystemFile, []byte(`{
  "scheduling-policy": "FIFO",
  "endpoint-delay": 0,
  "active-chunks-per-dimension": 1,
  "preferred-dataset-splits": 1,
  "all-reduce-implementation": ["ring"],
  "all-gather-implementation": ["ring"],
  "reduce-scatter-implementation": ["ring"],
  "all-to-all-implementation": ["ring"],
  "collective-optimization": "baseline",
  "roofline-enabled": 0
}
`)})
	out = append(out, OutFile{MemoryFile, []byte("{\n  \"memory-type\": \"NO_MEMORY_EXPANSION\"\n}\n")})
	out = append(out, OutFile{ReadmeFile, t.readme()})
	return out, nil
}

func (t *Trace) readme() []byte {
	var b bytes.Buffer
	r, nw := t.Run, t.Network
	fmt.Fprintf(&b, "# %s as Chakra execution traces\n\n", r.Algorithm)
	fmt.Fprintf(&b, "Written by `kernbench run --export-chakra`: the schedule of one run of\n")
	fmt.Fprintf(&b, "%s (%s, %d ranks, %d bytes of %s per rank),\n", r.Algorithm, r.Collective, r.World, r.Bytes, r.DType)
	fmt.Fprintf(&b, "which kernbench simulated in %s ns.\n\n", num(r.SimTimeNs))
	fmt.Fprintf(&b, "- `%s.RANK.et`, one file per rank: each of the %d IPCQ messages\n", t.Prefix(), t.Messages)
	fmt.Fprintf(&b, "  is a COMM_SEND node on its sender and a COMM_RECV node on its\n")
	if t.Comps > 0 {
		fmt.Fprintf(&b, "  receiver (comm_src, comm_dst, comm_tag, comm_size in bytes); each of\n")
		fmt.Fprintf(&b, "  the %d reductions a COMP node (num_ops: elements, tensor_size: bytes);\n", t.Comps)
	} else {
		fmt.Fprintf(&b, "  receiver (comm_src, comm_dst, comm_tag, comm_size in bytes); no\n")
		fmt.Fprintf(&b, "  reductions, so no COMP node;\n")
	}
	fmt.Fprintf(&b, "  data_deps where the kernel waited for data.\n")
	fmt.Fprintf(&b, "- `%s`: a %s of %d NPUs, %s GB/s and %s ns per link.\n", NetworkFile, nw.Topology, nw.NPUs, num(nw.GBps), num(nw.LatencyNs))
	if nw.Exact {
		fmt.Fprintf(&b, "  Every message's path in kernbench has this bandwidth and latency.\n")
	} else {
		fmt.Fprintf(&b, "  Approximate: %s.\n", nw.Why)
	}
	fmt.Fprintf(&b, "- `%s`, `%s`: the system and remote-memory configurations.\n\n", SystemFile, MemoryFile)
	fmt.Fprintf(&b, "Run them with ASTRA-sim's analytical backend, from this folder:\n\n")
	fmt.Fprintf(&b, "    ASTRA_SIM=path/to/astra-sim/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Aware\n")
	fmt.Fprintf(&b, "    \"$ASTRA_SIM\" \\\n")
	fmt.Fprintf(&b, "        --workload-configuration=./%s \\\n", t.Prefix())
	fmt.Fprintf(&b, "        --system-configuration=./%s \\\n", SystemFile)
	fmt.Fprintf(&b, "        --remote-memory-configuration=./%s \\\n", MemoryFile)
	fmt.Fprintf(&b, "        --network-configuration=./%s\n\n", NetworkFile)
	fmt.Fprintf(&b, "Each rank prints `sys[RANK] finished, N cycles` (a cycle is 1 ns).\n")
	fmt.Fprintf(&b, "The times differ from kernbench's by design: ASTRA-sim stores and\n")
	fmt.Fprintf(&b, "forwards whole messages at each hop, has a rank issue one send at a\n")
	fmt.Fprintf(&b, "time and completes it when the message arrives, runs each COMP node\n")
	fmt.Fprintf(&b, "for 1 ns (duration_micros 0, roofline off), and charges no memory\n")
	fmt.Fprintf(&b, "port, HBM latency, IPCQ overhead or credit. kernbench's\n")
	fmt.Fprintf(&b, "docs/astra-sim.md has the details and figures.\n")
	return b.Bytes()
}
