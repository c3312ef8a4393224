package tl

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/topology"
)

// Where ranks sit on the machine, for hierarchical algorithms (which cube
// or SIP a peer shares), and how many channels the topology installed.

// LocationValue is the struct(sip, cube, pe) of one rank: its SIP, its cube
// within the SIP and its PE within the cube.
func LocationValue(sip, cube, pe int) starlark.Value {
	return starlarkstruct.FromStringDict(starlark.String("location"), starlark.StringDict{
		"sip": starlark.MakeInt(sip), "cube": starlark.MakeInt(cube), "pe": starlark.MakeInt(pe),
	})
}

// MachineValue is the struct(sips, cubes_per_sip, pes_per_cube, world_size)
// of tl.machine and neighbors(machine=).
func MachineValue(sips, cubesPerSip, pesPerCube, world int) starlark.Value {
	return starlarkstruct.FromStringDict(starlark.String("machine"), starlark.StringDict{
		"sips": starlark.MakeInt(sips), "cubes_per_sip": starlark.MakeInt(cubesPerSip),
		"pes_per_cube": starlark.MakeInt(pesPerCube), "world_size": starlark.MakeInt(world),
	})
}

// LocationFunc is a location(rank) builtin answering from where.
func LocationFunc(name string, where func(rank int) (sip, cube, pe int, err error)) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		return callLocation(b, args, kw, where)
	})
}

func callLocation(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple, where func(rank int) (sip, cube, pe int, err error)) (starlark.Value, error) {
	var rank int
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &rank); err != nil {
		return nil, err
	}
	sip, cube, pe, err := where(rank)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	return LocationValue(sip, cube, pe), nil
}

func (k *Kernel) location(rank int) (sip, cube, pe int, err error) {
	if rank < 0 || rank >= len(k.M.Ranks) {
		return 0, 0, 0, fmt.Errorf("rank %d is outside [0, %d)", rank, len(k.M.Ranks))
	}
	p := k.M.Ranks[rank]
	return p.Sip, p.Cube % k.M.Params.CubesPerSip, p.Local, nil
}

// channels is the number of channels installed on this rank: one more than
// the highest channel suffix of its directions (1 without directions).
func (k *Kernel) channels() int {
	n := 1
	if k.EP == nil {
		return n
	}
	for _, q := range k.EP.QPs {
		_, c := topology.SplitChannel(q.Dir)
		n = max(n, c+1)
	}
	return n
}

func locationBuiltins() []Builtin {
	return []Builtin{
		{Name: "location", Sig: "location(rank)", Doc: "Where a rank sits on the machine: struct(sip, cube, pe) with its SIP, its cube within that SIP and its PE within that cube (system.placement applies). Two ranks share a cube when sip and cube are equal.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				return callLocation(b, args, kw, k.location)
			}},
		{Name: "channel", Sig: "channel(dir, c)", Doc: `The name of channel c of direction dir on a topology with channels: K: dir itself for c = 0, dir + "_" + str(c) for c >= 1 (tl.channel("E", 2) == "E_2"). Each channel is its own queue pair with its own rx ring.`,
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var dir string
				var c int
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 2, &dir, &c); err != nil {
					return nil, err
				}
				if c < 0 || c >= topology.MaxChannels {
					return nil, fmt.Errorf("%s: channel %d outside [0, %d)", b.Name(), c, topology.MaxChannels)
				}
				return starlark.String(topology.ChannelDir(dir, c)), nil
			}},
	}
}
