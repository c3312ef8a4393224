package chakra

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Attr is one attribute of a node (an AttributeProto): Value is an
// int32, int64, uint64, bool or string, written in the value field of
// that type.
type Attr struct {
	Name  string
	Value any
}

// Node is one node of a rank's execution trace.
type Node struct {
	ID             uint64
	Name           string
	Type           NodeType
	DataDeps       []uint64
	DurationMicros uint64
	Attrs          []Attr
}

// Attr returns the value of the node's attribute name.
func (n *Node) Attr(name string) (any, bool) {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return nil, false
}

// Int is the node's integer attribute name (any integer type), 0 and
// false without it.
func (n *Node) Int(name string) (int64, bool) {
	v, ok := n.Attr(name)
	switch x := v.(type) {
	case int32:
		return int64(x), ok
	case int64:
		return x, ok
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), ok
	}
	return 0, false
}

// Version is the schema version written in each file's GlobalMetadata.
const Version = "1.0.0"

// Proto3 leaves a field at its zero value out; a oneof member is
// written whatever its value.

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendAttr(b []byte, num protowire.Number, a Attr) ([]byte, error) {
	var m []byte
	m = appendString(m, attrName, a.Name)
	switch v := a.Value.(type) {
	case int32:
		m = protowire.AppendTag(m, attrInt32, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(int64(v)))
	case int64:
		m = protowire.AppendTag(m, attrInt64, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(v))
	case uint64:
		m = protowire.AppendTag(m, attrUint64, protowire.VarintType)
		m = protowire.AppendVarint(m, v)
	case bool:
		m = protowire.AppendTag(m, attrBool, protowire.VarintType)
		m = protowire.AppendVarint(m, protowire.EncodeBool(v))
	case string:
		m = protowire.AppendTag(m, attrString, protowire.BytesType)
		m = protowire.AppendString(m, v)
	default:
		return nil, fmt.Errorf("chakra: attribute %s has a value of type %T, which the schema's AttributeProto has no field for here", a.Name, a.Value)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m), nil
}

// appendDelimited appends message m preceded by its length, as Chakra's
// files hold their messages.
func appendDelimited(b, m []byte) []byte {
	return protowire.AppendBytes(b, m)
}

// EncodeMetadata is the GlobalMetadata message.
func EncodeMetadata(version string, attrs []Attr) ([]byte, error) {
	m := appendString(nil, metaVersion, version)
	var err error
	for _, a := range attrs {
		if m, err = appendAttr(m, metaAttr, a); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// EncodeNode is the Node message of n.
func EncodeNode(n *Node) ([]byte, error) {
	m := appendVarint(nil, nodeID, n.ID)
	m = appendString(m, nodeName, n.Name)
	m = appendVarint(m, nodeType, uint64(int64(n.Type)))
	if len(n.DataDeps) > 0 {
		var packed []byte
		for _, d := range n.DataDeps {
			packed = protowire.AppendVarint(packed, d)
		}
		m = protowire.AppendTag(m, nodeDataDeps, protowire.BytesType)
		m = protowire.AppendBytes(m, packed)
	}
	m = appendVarint(m, nodeDurMicros, n.DurationMicros)
	var err error
	for _, a := range n.Attrs {
		if m, err = appendAttr(m, nodeAttr, a); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// EncodeFile is an ET file: the metadata message, then the nodes, each
// preceded by its length.
func EncodeFile(meta []Attr, nodes []Node) ([]byte, error) {
	m, err := EncodeMetadata(Version, meta)
	if err != nil {
		return nil, err
	}
	out := appendDelimited(nil, m)
	for i := range nodes {
		m, err := EncodeNode(&nodes[i])
		if err != nil {
			return nil, err
		}
		out = appendDelimited(out, m)
	}
	return out, nil
}

// File is one ET file as read back: its metadata and nodes.
type File struct {
	Version string
	Meta    []Attr
	Nodes   []Node
}

// Decode reads an ET file with the protobuf runtime and the schema's
// descriptor (the same parser any reader of the schema uses), not with
// the encoder's own code.
func Decode(data []byte) (*File, error) {
	fd, err := fileDescriptor()
	if err != nil {
		return nil, err
	}
	msgs := fd.Messages()
	metaDesc, nodeDesc := msgs.ByName("GlobalMetadata"), msgs.ByName("Node")
	f := &File{}
	for i := 0; len(data) > 0; i++ {
		m, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return nil, fmt.Errorf("message %d: bad length prefix: %v", i, protowire.ParseError(n))
		}
		data = data[n:]
		desc := nodeDesc
		if i == 0 {
			desc = metaDesc
		}
		dm := dynamicpb.NewMessage(desc)
		if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(m, dm); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(dm.GetUnknown()) > 0 {
			return nil, fmt.Errorf("message %d: fields the schema does not declare", i)
		}
		if i == 0 {
			f.Version = dm.Get(desc.Fields().ByName("version")).String()
			f.Meta, err = decodeAttrs(dm.Get(desc.Fields().ByName("attr")).List())
			if err != nil {
				return nil, err
			}
			continue
		}
		fs := desc.Fields()
		node := Node{
			ID:             dm.Get(fs.ByName("id")).Uint(),
			Name:           dm.Get(fs.ByName("name")).String(),
			Type:           NodeType(dm.Get(fs.ByName("type")).Enum()),
			DurationMicros: dm.Get(fs.ByName("duration_micros")).Uint(),
		}
		deps := dm.Get(fs.ByName("data_deps")).List()
		for j := 0; j < deps.Len(); j++ {
			node.DataDeps = append(node.DataDeps, deps.Get(j).Uint())
		}
		if dm.Get(fs.ByName("ctrl_deps")).List().Len() > 0 {
			return nil, fmt.Errorf("node %d: ctrl_deps, which the exporter never writes", node.ID)
		}
		if node.Attrs, err = decodeAttrs(dm.Get(fs.ByName("attr")).List()); err != nil {
			return nil, fmt.Errorf("node %d: %w", node.ID, err)
		}
		f.Nodes = append(f.Nodes, node)
	}
	if f.Version == "" && f.Nodes == nil {
		return nil, errors.New("empty file: no GlobalMetadata")
	}
	return f, nil
}

func decodeAttrs(l protoreflect.List) ([]Attr, error) {
	var out []Attr
	for j := 0; j < l.Len(); j++ {
		am := l.Get(j).Message()
		fs := am.Descriptor().Fields()
		a := Attr{Name: am.Get(fs.ByName("name")).String()}
		which := am.WhichOneof(am.Descriptor().Oneofs().ByName("value"))
		if which == nil {
			return nil, fmt.Errorf("attribute %s has no value", a.Name)
		}
		v := am.Get(which)
		switch which.Kind() {
		case protoreflect.Int32Kind:
			a.Value = int32(v.Int())
		case protoreflect.Int64Kind:
			a.Value = v.Int()
		case protoreflect.Uint64Kind:
			a.Value = v.Uint()
		case protoreflect.BoolKind:
			a.Value = v.Bool()
		case protoreflect.StringKind:
			a.Value = v.String()
		}
		out = append(out, a)
	}
	return out, nil
}
