#!/usr/bin/env python3
"""Writes the kernels of moe_amd64.s: dotQ8_0Q8_0Rows{1..8}U, one pattern
with m accumulators (go generate ./kernels/cpu). Each kernel walks the weight
rows in pairs; per block it loads the pair (UPAIR_LOAD) and runs one UPROD
per activation row j (scale at 4j(BX), block at the j-th activation row),
then sums and stores each accumulator's halves as dotq8v_amd64.s does."""
import os
os.chdir(os.path.dirname(os.path.abspath(__file__)))
# The header (comments, macros) is kept by hand in moe_amd64.s; everything
# from the first kernel on is rewritten.
_src = open("moe_amd64.s").read()
hdr = _src[:_src.index("// func dotQ8_0Q8_0Rows1U")]
def mem(j):
    return {0:"2(DI)",1:"2(DI)(R10*1)",2:"2(DI)(R10*2)",3:"2(DX)",4:"2(DI)(R10*4)",5:"2(DX)(R10*2)",6:"2(R11)",7:"2(DX)(R10*4)"}[j]
temps=[("Z20","Z21","Z22"),("Z23","Z24","Z25"),("Z26","Z27","Z28"),("Z29","Z19","Z8"),("Z9","Z10","Z11"),("Z12","Z13","Z14"),("Z15","Z20","Z21"),("Z22","Z23","Z24")]
def store(m, off):
    lines=[]
    addr={0:"(R12)",1:"(R12)(R13*1)",2:"(R12)(R13*2)",4:"(R12)(R13*4)"}
    for j in range(m):
        if j in addr:
            lines.append(f"\tVMOVSS X{j}, {off}{addr[j]}")
    rest=[j for j in range(m) if j not in addr]
    if rest:
        lines.append("\tLEAQ   (R12)(R13*2), BX")
        lines.append("\tADDQ   R13, BX")
        for j in rest:
            if j==3: lines.append(f"\tVMOVSS X3, {off}(BX)")
            if j==5: lines.append(f"\tVMOVSS X5, {off}(BX)(R13*2)")
            if j==7: lines.append(f"\tVMOVSS X7, {off}(BX)(R13*4)")
        if 6 in rest:
            lines.append("\tADDQ   R13, BX\n\tADDQ   R13, BX\n\tADDQ   R13, BX")
            lines.append(f"\tVMOVSS X6, {off}(BX)")
    return "\n".join(lines)
out=[hdr.rstrip('\n')+'\n']
for m in range(1,9):
    name=f"dotQ8_0Q8_0Rows{m}U"
    L=f"u{m}"
    body=[f"// func {name}(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)",
          f"TEXT ·{name}(SB), NOSPLIT, $0-72", "\tULOAD_ARGS", "", f"{L}row:", f"\tUPAIR_START({L}done)", "\tMOVQ   x+16(FP), DI"]
    if m>=4:
        body.append("\tLEAQ   (DI)(R10*2), DX\n\tADDQ   R10, DX")
    if m>=7:
        body.append("\tLEAQ   (DX)(R10*2), R11\n\tADDQ   R10, R11")
    for j in range(m):
        body.append(f"\tVXORPS Z{j}, Z{j}, Z{j}")
    body += ["", f"{L}blk:", "\tPREFETCHT0 (AX)(R8*8)", "\tPREFETCHT0 (AX)(R15*1)", "\tUPAIR_LOAD"]
    for j in range(m):
        q,s_,t=temps[j]
        body.append(f"\tUPROD({4*j}, {mem(j)}, Z{j}, {q}, {s_}, {t})")
    body += ["\tADDQ       $34, AX","\tADDQ       $34, DI"]
    if m>=4: body.append("\tADDQ       $34, DX")
    if m>=7: body.append("\tADDQ       $34, R11")
    body += [f"\tADDQ       ${8*m}, BX","\tDECQ       CX",f"\tJNZ        {L}blk",""]
    for j in range(m):
        body.append(f"\tVEXTRACTF64X4 $1, Z{j}, Y{16+j}")
    for j in range(m):
        body.append(f"\tHSUM(Y{j}, X{j}, X13)")
    body.append(store(m,0))
    body += ["\tTESTQ R9, R9", f"\tJEQ   {L}done"]
    for j in range(m):
        body.append(f"\tVMOVAPS Y{16+j}, Y{j}")
    for j in range(m):
        body.append(f"\tHSUM(Y{j}, X{j}, X13)")
    body.append(store(m,4))
    body += [f"\tUPAIR_NEXT({L}row, {L}done)", "", f"{L}done:", "\tVZEROUPPER", "\tRET", ""]
    out.append("\n".join(body))
open("moe_amd64.s","w").write("\n".join(out))
