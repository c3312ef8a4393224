#include "textflag.h"

// func fillF32SumAVX2(v *float32, sums *int32, groups int, state uint64)
//
// fillF32Sum's loop four lanes at a time (AVX2): for group g, lane j has
// the state state+(4g+j+1)·smGamma, mixed as f32GridK mixes it (the
// 64-bit products built from VPMULUDQ's 32-bit ones, as AVX2 has no
// 64-bit multiply), k = top 19 bits - 2^18, written as float32(k)·2^-18
// (exact: k fits a float32) and added to sums (int32, wrapping as Go's).
TEXT ·fillF32SumAVX2(SB), NOSPLIT, $0-32
	MOVQ v+0(FP), DI
	MOVQ sums+8(FP), SI
	MOVQ groups+16(FP), CX
	MOVQ state+24(FP), AX
	TESTQ CX, CX
	JE   done

	// Y0: the four lanes' states of the first group.
	MOVQ $0x9e3779b97f4a7c15, BX
	ADDQ BX, AX
	MOVQ AX, X0
	ADDQ BX, AX
	MOVQ AX, X1
	VPUNPCKLQDQ X1, X0, X0
	ADDQ BX, AX
	MOVQ AX, X2
	ADDQ BX, AX
	MOVQ AX, X3
	VPUNPCKLQDQ X3, X2, X2
	VINSERTI128 $1, X2, Y0, Y0

	// Y4: 4·smGamma; Y5, Y6: smMul1's low and high halves; Y7, Y8:
	// smMul2's; X9: 2^18 per dword; X10: 2^-18 as float32 per dword.
	MOVQ $0x78dde6e5fd29f054, BX
	MOVQ BX, X4
	VPBROADCASTQ X4, Y4
	MOVQ $0x1ce4e5b9, BX
	MOVQ BX, X5
	VPBROADCASTQ X5, Y5
	MOVQ $0xbf58476d, BX
	MOVQ BX, X6
	VPBROADCASTQ X6, Y6
	MOVQ $0x133111eb, BX
	MOVQ BX, X7
	VPBROADCASTQ X7, Y7
	MOVQ $0x94d049bb, BX
	MOVQ BX, X8
	VPBROADCASTQ X8, Y8
	MOVQ $0x40000, BX
	MOVQ BX, X9
	VPBROADCASTD X9, X9
	MOVQ $0x36800000, BX
	MOVQ BX, X10
	VPBROADCASTD X10, X10

loop:
	// z = (s ^ s>>30) · smMul1
	VPSRLQ   $30, Y0, Y1
	VPXOR    Y0, Y1, Y1
	VPMULUDQ Y5, Y1, Y2
	VPSRLQ   $32, Y1, Y3
	VPMULUDQ Y5, Y3, Y3
	VPMULUDQ Y6, Y1, Y11
	VPADDQ   Y11, Y3, Y3
	VPSLLQ   $32, Y3, Y3
	VPADDQ   Y3, Y2, Y1
	// z = (z ^ z>>27) · smMul2
	VPSRLQ   $27, Y1, Y2
	VPXOR    Y1, Y2, Y1
	VPMULUDQ Y7, Y1, Y2
	VPSRLQ   $32, Y1, Y3
	VPMULUDQ Y7, Y3, Y3
	VPMULUDQ Y8, Y1, Y11
	VPADDQ   Y11, Y3, Y3
	VPSLLQ   $32, Y3, Y3
	VPADDQ   Y3, Y2, Y1
	// k = z>>45 - 2^18, the four lanes' low dwords packed into X1
	VPSRLQ   $45, Y1, Y1
	VPSHUFD  $0x08, Y1, Y1
	VPERMQ   $0x08, Y1, Y1
	VPSUBD   X9, X1, X1
	VCVTDQ2PS X1, X2
	VMULPS   X10, X2, X2
	VMOVUPS  X2, (DI)
	VPADDD   (SI), X1, X1
	VMOVDQU  X1, (SI)
	VPADDQ   Y4, Y0, Y0
	ADDQ     $16, DI
	ADDQ     $16, SI
	DECQ     CX
	JNZ      loop
	VZEROUPPER

done:
	RET
