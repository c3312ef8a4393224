#include "textflag.h"

// func addF32Groups(dst, a, b *float32, groups int)
//
// dst[i] = a[i] + b[i] for groups×4 elements, four at a time and in
// order: each group of four is loaded, added (ADDPS: a's lane first, as
// the scalar ADDSS form does) and stored before the next is loaded, so an
// overlapping dst reads what the scalar loop of four would. The legacy
// SSE ADDPS needs an aligned memory operand, hence both loads to
// registers (MOVUPS takes any alignment).
TEXT ·addF32Groups(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ groups+24(FP), CX
	XORQ AX, AX
	CMPQ CX, $2
	JB   one

pair:
	MOVUPS (SI)(AX*1), X0
	MOVUPS (DX)(AX*1), X1
	ADDPS  X1, X0
	MOVUPS X0, (DI)(AX*1)
	MOVUPS 16(SI)(AX*1), X2
	MOVUPS 16(DX)(AX*1), X3
	ADDPS  X3, X2
	MOVUPS X2, 16(DI)(AX*1)
	ADDQ   $32, AX
	SUBQ   $2, CX
	CMPQ   CX, $2
	JAE    pair

one:
	TESTQ  CX, CX
	JE     done
	MOVUPS (SI)(AX*1), X0
	MOVUPS (DX)(AX*1), X1
	ADDPS  X1, X0
	MOVUPS X0, (DI)(AX*1)

done:
	RET
