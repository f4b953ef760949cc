/* user_ptx.h - small hand-written PTX used as "user" device code by the C
 * tests (JIT-compiled by the driver through fc_module_load_ptx).
 *
 *   scale_f32(u64 x, f32 s, u32 n)          x[i] = x[i] * s        (3 params)
 *   axpy_f32(u64 y, u64 x, f32 a, u32 n)    y[i] = y[i] + a * x[i] (4 params;
 *                                           mul.rn then add.rn: two roundings,
 *                                           never fused into an fma)
 * Launch 1-D with any block size; threads with i >= n do nothing.
 */
#ifndef FC_CTEST_USER_PTX_H
#define FC_CTEST_USER_PTX_H

/* The lines both kernels share, textually: loads n, %r5 = ctaid.x * ntid.x +
 * tid.x, and branches to $L__<name>_done when %r5 >= n. */
#define USER_PTX_INDEX_GUARD(name)                                         \
    "\tld.param.u32 \t%r1, [n];\n"                                         \
    "\tmov.u32 \t%r2, %ctaid.x;\n"                                         \
    "\tmov.u32 \t%r3, %ntid.x;\n"                                          \
    "\tmov.u32 \t%r4, %tid.x;\n"                                           \
    "\tmad.lo.s32 \t%r5, %r2, %r3, %r4;\n"                                 \
    "\tsetp.ge.u32 \t%p1, %r5, %r1;\n"                                     \
    "\t@%p1 bra \t$L__" name "_done;\n"

static const char USER_PTX[] =
    "// fc-graph C tests: user kernels\n"
    ".version 7.0\n"
    ".target sm_35\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry scale_f32(\n"
    "\t.param .u64 x,\n"
    "\t.param .f32 s,\n"
    "\t.param .u32 n\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<2>;\n"
    "\t.reg .b32 \t%r<6>;\n"
    "\t.reg .f32 \t%f<4>;\n"
    "\t.reg .b64 \t%rd<6>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [x];\n"
    "\tld.param.f32 \t%f1, [s];\n"
    USER_PTX_INDEX_GUARD("scale")
    "\tcvta.to.global.u64 \t%rd2, %rd1;\n"
    "\tmul.wide.u32 \t%rd3, %r5, 4;\n"
    "\tadd.s64 \t%rd4, %rd2, %rd3;\n"
    "\tld.global.f32 \t%f2, [%rd4];\n"
    "\tmul.rn.f32 \t%f3, %f2, %f1;\n"
    "\tst.global.f32 \t[%rd4], %f3;\n"
    "$L__scale_done:\n"
    "\tret;\n"
    "}\n"
    "\n"
    ".visible .entry axpy_f32(\n"
    "\t.param .u64 y,\n"
    "\t.param .u64 x,\n"
    "\t.param .f32 a,\n"
    "\t.param .u32 n\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<2>;\n"
    "\t.reg .b32 \t%r<6>;\n"
    "\t.reg .f32 \t%f<6>;\n"
    "\t.reg .b64 \t%rd<9>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [y];\n"
    "\tld.param.u64 \t%rd2, [x];\n"
    "\tld.param.f32 \t%f1, [a];\n"
    USER_PTX_INDEX_GUARD("axpy")
    "\tcvta.to.global.u64 \t%rd3, %rd1;\n"
    "\tcvta.to.global.u64 \t%rd4, %rd2;\n"
    "\tmul.wide.u32 \t%rd5, %r5, 4;\n"
    "\tadd.s64 \t%rd6, %rd3, %rd5;\n"
    "\tadd.s64 \t%rd7, %rd4, %rd5;\n"
    "\tld.global.f32 \t%f2, [%rd6];\n"
    "\tld.global.f32 \t%f3, [%rd7];\n"
    "\tmul.rn.f32 \t%f4, %f3, %f1;\n"
    "\tadd.rn.f32 \t%f5, %f2, %f4;\n"
    "\tst.global.f32 \t[%rd6], %f5;\n"
    "$L__axpy_done:\n"
    "\tret;\n"
    "}\n";

#endif /* FC_CTEST_USER_PTX_H */
