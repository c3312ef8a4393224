package chakra

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The schema the exporter writes, declared once in Go: et_def.proto says
// the same in protobuf's language (TestProtoMatchesSchema holds them
// together). The encoder takes its field numbers from here, and the
// descriptor built from it decodes the files (Decode).

// protoPackage is the schema's package: the messages' full names are
// ChakraProtoMsg.Node and so on.
const protoPackage = "ChakraProtoMsg"

// fieldSpec is one field of a message: its name, number and type as
// the .proto spells it (a scalar type, or a message or enum of the
// schema), whether it is repeated and the oneof it belongs to.
type fieldSpec struct {
	Name     string
	Number   protowire.Number
	Type     string
	Repeated bool
	Oneof    string
}

type messageSpec struct {
	Name   string
	Fields []fieldSpec
}

type enumValue struct {
	Name   string
	Number int32
}

type enumSpec struct {
	Name   string
	Values []enumValue
}

var schemaMessages = []messageSpec{
	{"AttributeProto", []fieldSpec{
		{Name: "name", Number: 1, Type: "string"},
		{Name: "doc_string", Number: 2, Type: "string"},
		{Name: "int32_val", Number: 7, Type: "int32", Oneof: "value"},
		{Name: "int64_val", Number: 9, Type: "int64", Oneof: "value"},
		{Name: "uint64_val", Number: 13, Type: "uint64", Oneof: "value"},
		{Name: "bool_val", Number: 27, Type: "bool", Oneof: "value"},
		{Name: "string_val", Number: 29, Type: "string", Oneof: "value"},
	}},
	{"GlobalMetadata", []fieldSpec{
		{Name: "version", Number: 1, Type: "string"},
		{Name: "attr", Number: 2, Type: "AttributeProto", Repeated: true},
	}},
	{"Node", []fieldSpec{
		{Name: "id", Number: 1, Type: "uint64"},
		{Name: "name", Number: 2, Type: "string"},
		{Name: "type", Number: 3, Type: "NodeType"},
		{Name: "ctrl_deps", Number: 4, Type: "uint64", Repeated: true},
		{Name: "data_deps", Number: 5, Type: "uint64", Repeated: true},
		{Name: "start_time_micros", Number: 6, Type: "uint64"},
		{Name: "duration_micros", Number: 7, Type: "uint64"},
		{Name: "attr", Number: 10, Type: "AttributeProto", Repeated: true},
	}},
}

var schemaEnums = []enumSpec{
	{"NodeType", []enumValue{
		{"INVALID_NODE", 0}, {"METADATA_NODE", 1}, {"MEM_LOAD_NODE", 2}, {"MEM_STORE_NODE", 3},
		{"COMP_NODE", 4}, {"COMM_SEND_NODE", 5}, {"COMM_RECV_NODE", 6}, {"COMM_COLL_NODE", 7},
	}},
}

// NodeType is a Chakra node's type (the schema's NodeType enum).
type NodeType int32

// The node types; the exporter writes metadata, compute, send and receive
// nodes.
const (
	InvalidNode  NodeType = 0
	MetadataNode NodeType = 1
	MemLoadNode  NodeType = 2
	MemStoreNode NodeType = 3
	CompNode     NodeType = 4
	CommSendNode NodeType = 5
	CommRecvNode NodeType = 6
	CommCollNode NodeType = 7
)

func (t NodeType) String() string {
	for _, v := range schemaEnums[0].Values {
		if v.Number == int32(t) {
			return v.Name
		}
	}
	return fmt.Sprintf("NodeType(%d)", int32(t))
}

// field is the number of message msg's field name in the schema.
func field(msg, name string) protowire.Number {
	for _, m := range schemaMessages {
		if m.Name != msg {
			continue
		}
		for _, f := range m.Fields {
			if f.Name == name {
				return f.Number
			}
		}
	}
	panic(fmt.Sprintf("chakra: the schema has no field %s.%s", msg, name)) // a slip in this file, caught by every test
}

// The field numbers the encoder writes.
var (
	attrName      = field("AttributeProto", "name")
	attrInt32     = field("AttributeProto", "int32_val")
	attrInt64     = field("AttributeProto", "int64_val")
	attrUint64    = field("AttributeProto", "uint64_val")
	attrBool      = field("AttributeProto", "bool_val")
	attrString    = field("AttributeProto", "string_val")
	metaVersion   = field("GlobalMetadata", "version")
	metaAttr      = field("GlobalMetadata", "attr")
	nodeID        = field("Node", "id")
	nodeName      = field("Node", "name")
	nodeType      = field("Node", "type")
	nodeDataDeps  = field("Node", "data_deps")
	nodeDurMicros = field("Node", "duration_micros")
	nodeAttr      = field("Node", "attr")
)

// scalarTypes are protobuf's scalar types by their .proto names.
var scalarTypes = map[string]descriptorpb.FieldDescriptorProto_Type{
	"double": descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, "float": descriptorpb.FieldDescriptorProto_TYPE_FLOAT,
	"int32": descriptorpb.FieldDescriptorProto_TYPE_INT32, "int64": descriptorpb.FieldDescriptorProto_TYPE_INT64,
	"uint32": descriptorpb.FieldDescriptorProto_TYPE_UINT32, "uint64": descriptorpb.FieldDescriptorProto_TYPE_UINT64,
	"sint32": descriptorpb.FieldDescriptorProto_TYPE_SINT32, "sint64": descriptorpb.FieldDescriptorProto_TYPE_SINT64,
	"fixed32": descriptorpb.FieldDescriptorProto_TYPE_FIXED32, "fixed64": descriptorpb.FieldDescriptorProto_TYPE_FIXED64,
	"sfixed32": descriptorpb.FieldDescriptorProto_TYPE_SFIXED32, "sfixed64": descriptorpb.FieldDescriptorProto_TYPE_SFIXED64,
	"bool": descriptorpb.FieldDescriptorProto_TYPE_BOOL, "string": descriptorpb.FieldDescriptorProto_TYPE_STRING,
	"bytes": descriptorpb.FieldDescriptorProto_TYPE_BYTES,
}

// fileDescriptor is the schema as a protobuf file descriptor, built from
// schemaMessages and schemaEnums.
func fileDescriptor() (protoreflect.FileDescriptor, error) {
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("kernbench/engine/chakra/et_def.proto"),
		Package: proto.String(protoPackage),
		Syntax:  proto.String("proto3"),
	}
	for _, e := range schemaEnums {
		ed := &descriptorpb.EnumDescriptorProto{Name: proto.String(e.Name)}
		for _, v := range e.Values {
			ed.Value = append(ed.Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(v.Name), Number: proto.Int32(v.Number)})
		}
		fd.EnumType = append(fd.EnumType, ed)
	}
	isEnum := func(name string) bool {
		for _, e := range schemaEnums {
			if e.Name == name {
				return true
			}
		}
		return false
	}
	for _, m := range schemaMessages {
		md := &descriptorpb.DescriptorProto{Name: proto.String(m.Name)}
		oneofs := map[string]int32{}
		for _, f := range m.Fields {
			d := &descriptorpb.FieldDescriptorProto{
				Name:     proto.String(f.Name),
				JsonName: proto.String(protodescJSONName(f.Name)),
				Number:   proto.Int32(int32(f.Number)),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			}
			if f.Repeated {
				d.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
			}
			switch t, ok := scalarTypes[f.Type]; {
			case ok:
				d.Type = t.Enum()
			case isEnum(f.Type):
				d.Type = descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum()
				d.TypeName = proto.String("." + protoPackage + "." + f.Type)
			default:
				d.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
				d.TypeName = proto.String("." + protoPackage + "." + f.Type)
			}
			if f.Oneof != "" {
				i, ok := oneofs[f.Oneof]
				if !ok {
					i = int32(len(md.OneofDecl))
					oneofs[f.Oneof] = i
					md.OneofDecl = append(md.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String(f.Oneof)})
				}
				d.OneofIndex = proto.Int32(i)
			}
			md.Field = append(md.Field, d)
		}
		fd.MessageType = append(fd.MessageType, md)
	}
	return protodesc.NewFile(fd, nil)
}

// protodescJSONName is protoc's JSON name of a field: lowerCamelCase.
func protodescJSONName(s string) string {
	out := make([]byte, 0, len(s))
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			out = append(out, c-'a'+'A')
			up = false
		default:
			out = append(out, c)
			up = false
		}
	}
	return string(out)
}
