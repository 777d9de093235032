#pragma once
// What the prebuilt library (ptrain::prebuilt, src/prebuilt/) compiles once, so that a program
// linking it does not compile it again: the float and double specialisations on the CPU of the
// kernels, the autograd ops and backward, as fmt's compiled library holds its formatting.
//
// A header lists its own, at its end: PTRAIN_PREBUILT_KERNEL(kernels::cpu::gemm<float>) names one
// function template specialisation (the macro reads its type with decltype, so the list does not
// repeat signatures). What a list line becomes:
//   - in the library's sources of its area (KERNEL: src/prebuilt/kernels*.cpp, which define
//     PTRAIN_PREBUILT_DEFINE_KERNELS; OP: ops.cpp; STATE, the state dicts, safetensors and
//     checkpoint files: state.cpp): an explicit instantiation, compiled there;
//   - in a program built against the library (PTRAIN_PREBUILT, which ptrain::prebuilt's users get
//     from CMake): an explicit instantiation declaration, `extern template`, so the compiler calls
//     the library's copy instead of instantiating its own;
//   - header-only (no PTRAIN_PREBUILT, or PTRAIN_HEADER_ONLY defined), and in CUDA translation
//     units: nothing.
// Functions defined in a class body are inline, and an optimising compiler instantiates an inline
// function whatever an extern template says, so the lists name free function templates only.

#if defined(PTRAIN_PREBUILT) && !defined(PTRAIN_HEADER_ONLY) && !defined(__CUDACC__)
#define PTRAIN_PREBUILT_EXTERN(...) extern template decltype(__VA_ARGS__) __VA_ARGS__;
#else
#define PTRAIN_PREBUILT_EXTERN(...)
#endif
#define PTRAIN_PREBUILT_INSTANTIATE(...) template decltype(__VA_ARGS__) __VA_ARGS__;

#if defined(PTRAIN_PREBUILT_DEFINE_KERNELS)
#define PTRAIN_PREBUILT_KERNEL(...) PTRAIN_PREBUILT_INSTANTIATE(__VA_ARGS__)
#else
#define PTRAIN_PREBUILT_KERNEL(...) PTRAIN_PREBUILT_EXTERN(__VA_ARGS__)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_OPS)
#define PTRAIN_PREBUILT_OP(...) PTRAIN_PREBUILT_INSTANTIATE(__VA_ARGS__)
#else
#define PTRAIN_PREBUILT_OP(...) PTRAIN_PREBUILT_EXTERN(__VA_ARGS__)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_STATE)
#define PTRAIN_PREBUILT_STATE(...) PTRAIN_PREBUILT_INSTANTIATE(__VA_ARGS__)
#else
#define PTRAIN_PREBUILT_STATE(...) PTRAIN_PREBUILT_EXTERN(__VA_ARGS__)
#endif

// The lists stand after their header's namespace, so they name templates in full: ptrain::...
// A kernel's float and double specialisations; an op's, on the CPU; a state file's.
#define PTRAIN_PREBUILT_KERNELS_FD(f) PTRAIN_PREBUILT_KERNEL(f<float>) PTRAIN_PREBUILT_KERNEL(f<double>)
#define PTRAIN_PREBUILT_OPS_FD(f) PTRAIN_PREBUILT_OP(f<float, ::ptrain::Cpu>) PTRAIN_PREBUILT_OP(f<double, ::ptrain::Cpu>)
#define PTRAIN_PREBUILT_STATE_FD(f) PTRAIN_PREBUILT_STATE(f<float>) PTRAIN_PREBUILT_STATE(f<double>)
