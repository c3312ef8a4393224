package dtype

import "unsafe"

// f32View returns the len(b)/4 f32 elements of b in place, without
// decoding, when the host byte order is the simulated memory's and b is
// 4-byte aligned (simulated memory is); ok is false otherwise and the
// caller takes the portable path. The element loops of large buffers (the
// reference reduction, Fill, Binary on f32) decode every element through
// encoding/binary otherwise, with a bounds check per element.
func f32View(b []byte) (v []float32, ok bool) {
	if !nativeLE {
		return nil, false
	}
	if len(b) < 4 {
		return nil, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(b)/4), true
}
