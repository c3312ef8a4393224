package chakra

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// parseProto reads the messages and enums of et_def.proto: just the
// constructs that file uses (message, enum, oneof, repeated fields).
func parseProto(t *testing.T, src string) ([]messageSpec, []enumSpec) {
	t.Helper()
	var msgs []messageSpec
	var enums []enumSpec
	fieldRe := regexp.MustCompile(`^(repeated\s+)?(\w+)\s+(\w+)\s*=\s*(\d+)\s*;$`)
	valueRe := regexp.MustCompile(`^(\w+)\s*=\s*(\d+)\s*;$`)
	var msg *messageSpec
	var enum *enumSpec
	oneof := ""
	for i, line := range strings.Split(src, "\n") {
		if j := strings.Index(line, "//"); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "syntax") || strings.HasPrefix(line, "package"):
		case strings.HasPrefix(line, "message "):
			msgs = append(msgs, messageSpec{Name: strings.Fields(line)[1]})
			msg = &msgs[len(msgs)-1]
		case strings.HasPrefix(line, "enum "):
			enums = append(enums, enumSpec{Name: strings.Fields(line)[1]})
			enum = &enums[len(enums)-1]
		case strings.HasPrefix(line, "oneof "):
			oneof = strings.Fields(line)[1]
		case line == "}":
			switch {
			case oneof != "":
				oneof = ""
			case enum != nil:
				enum = nil
			default:
				msg = nil
			}
		case enum != nil:
			m := valueRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("et_def.proto:%d: cannot read enum value %q", i+1, line)
			}
			n, _ := strconv.Atoi(m[2])
			enum.Values = append(enum.Values, enumValue{m[1], int32(n)})
		case msg != nil:
			m := fieldRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("et_def.proto:%d: cannot read field %q", i+1, line)
			}
			n, _ := strconv.Atoi(m[4])
			msg.Fields = append(msg.Fields, fieldSpec{Name: m[3], Number: protowire.Number(n), Type: m[2], Repeated: m[1] != "", Oneof: oneof})
		default:
			t.Fatalf("et_def.proto:%d: unexpected %q", i+1, line)
		}
	}
	return msgs, enums
}

// et_def.proto, the declared schema, and schema.go, what the encoder
// writes, name the same messages, fields, numbers, types and enum values.
func TestProtoMatchesSchema(t *testing.T) {
	src, err := os.ReadFile("et_def.proto")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "package "+protoPackage+";") {
		t.Errorf("et_def.proto does not declare package %s", protoPackage)
	}
	msgs, enums := parseProto(t, string(src))
	if d := cmp.Diff(msgs, schemaMessages); d != "" {
		t.Errorf("messages: et_def.proto (-) and schema.go (+) differ:\n%s", d)
	}
	if d := cmp.Diff(enums, schemaEnums); d != "" {
		t.Errorf("enums: et_def.proto (-) and schema.go (+) differ:\n%s", d)
	}
	if _, err := fileDescriptor(); err != nil {
		t.Fatalf("the schema is not a valid protobuf file: %v", err)
	}
}

// The hand encoding is what the protobuf runtime makes of the same
// message: decoded with the schema's descriptor and marshalled again
// (deterministically), every message gives back its bytes.
func TestEncodingIsProtobufs(t *testing.T) {
	fd, err := fileDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	nodes := []Node{
		{ID: 0, Name: "meta", Type: MetadataNode, Attrs: []Attr{{"s", "x"}, {"b", false}, {"i", int64(0)}}},
		{ID: 7, Name: "send", Type: CommSendNode, DataDeps: []uint64{1, 300, 1 << 40}, Attrs: []Attr{
			{"comm_src", int32(3)}, {"comm_dst", int32(-1)}, {"comm_tag", int32(0)}, {"comm_size", int64(1) << 33}, {"is_cpu_op", true},
		}},
		{ID: 8, Type: CompNode, DurationMicros: 5, Attrs: []Attr{{"tensor_size", uint64(1) << 63}, {"num_ops", int64(-5)}}},
	}
	meta := []Attr{{"rank", int64(3)}, {"source", "test"}}
	file, err := EncodeFile(meta, nodes)
	if err != nil {
		t.Fatal(err)
	}
	data := file
	for i := 0; len(data) > 0; i++ {
		m, n := protowire.ConsumeBytes(data)
		if n < 0 {
			t.Fatalf("message %d: %v", i, protowire.ParseError(n))
		}
		data = data[n:]
		desc := fd.Messages().ByName("Node")
		if i == 0 {
			desc = fd.Messages().ByName("GlobalMetadata")
		}
		dm := dynamicpb.NewMessage(desc)
		if err := proto.Unmarshal(m, dm); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		again, err := proto.MarshalOptions{Deterministic: true}.Marshal(dm)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(m, again); d != "" {
			t.Errorf("message %d: the encoder's bytes (-) and the runtime's (+) differ:\n%s", i, d)
		}
	}
	got, err := Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	want := &File{Version: Version, Meta: meta, Nodes: nodes}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("decoded file (-want +got):\n%s", d)
	}
}

func TestEncodeRefusesUnknownAttrType(t *testing.T) {
	_, err := EncodeNode(&Node{Attrs: []Attr{{"f", 1.5}}})
	if err == nil || !strings.Contains(err.Error(), "float64") {
		t.Errorf("EncodeNode with a float attribute: err = %v, want one naming float64", err)
	}
}
