#pragma once
// What the prebuilt library (ptrain::prebuilt, src/prebuilt/) compiles once, so that a program
// linking it does not compile it again, as fmt's compiled library holds its formatting: the float
// and double specialisations on the CPU of the kernels, the autograd ops and backward, the state
// files, the tensors, layers, models, optimizers and the loader of a TensorDataset, and the
// functions that are not templates (the run's logs, checkpoint files, TensorBoard's writer, atomic
// files, the launch environment).
//
// Templates: a header lists its own at its end, each line naming one specialisation.
//   PTRAIN_PREBUILT_KERNEL(kernels::cpu::gemm<float>), _OP, _STATE: a function template's (the
//     macro reads its type with decltype, so the list does not repeat signatures);
//   PTRAIN_PREBUILT_OP_DECLARATION(void ptrain::TopKAccuracy::update<float, ptrain::Cpu>(...)): a
//     member function template's, by its declaration (decltype cannot name one);
//   PTRAIN_PREBUILT_CLASS(ptrain::Linear<float, ptrain::Cpu>), _MODEL: a class template's, all its
//     members;
//   PTRAIN_PREBUILT_TRAINER(class ptrain::Trainer<...>), PTRAIN_PREBUILT_TRAINER(<a member template's
//     declaration>): the Trainer's, whose members GCC would still expand where they are defined
//     in the class, so the Trainer defines its large ones after it; PTRAIN_PREBUILT_TRAINER_MPI:
//     the same for a Trainer with an MPI policy.
// What a list line becomes:
//   - in the library's source of its area (KERNEL: src/prebuilt/kernels*.cpp, which define
//     PTRAIN_PREBUILT_DEFINE_KERNELS; OP: ops.cpp; STATE: state.cpp; CLASS: classes.cpp; MODEL:
//     models.cpp; TRAINER: trainer.cpp; TRAINER_MPI: trainer_mpi.cpp): an explicit instantiation,
//     compiled there;
//   - in a program built against the library (PTRAIN_PREBUILT, which ptrain::prebuilt's users get
//     from CMake): an explicit instantiation declaration, `extern template`, so the compiler calls
//     the library's copy instead of compiling its own (GCC and Clang still expand a member defined
//     in its class body where they inline it, but emit no copy of it);
//   - header-only (no PTRAIN_PREBUILT, or PTRAIN_HEADER_ONLY defined), and in CUDA translation
//     units: nothing.
//
// Functions that are not templates are declared in their header and defined after the
// declarations under `#if PTRAIN_PREBUILT_FUNCTION_BODIES`, each marked PTRAIN_PREBUILT_INLINE:
// inline header-only; one ordinary definition in the library's src/prebuilt/functions.cpp
// (PTRAIN_PREBUILT_DEFINE_FUNCTIONS); not seen at all by a program built against the library. That
// source compiles ptrain/ptrain.hpp without the optional components (MPI, images, SentencePiece,
// CUDA), so only headers it reaches that way may hold such functions.

#if defined(PTRAIN_PREBUILT) && !defined(PTRAIN_HEADER_ONLY) && !defined(__CUDACC__)
#define PTRAIN_PREBUILT_IN_USE 1
#else
#define PTRAIN_PREBUILT_IN_USE 0
#endif

#if PTRAIN_PREBUILT_IN_USE
#define PTRAIN_PREBUILT_EXTERN(...) extern template decltype(__VA_ARGS__) __VA_ARGS__;
#define PTRAIN_PREBUILT_EXTERN_DECLARATION(...) extern template __VA_ARGS__;
#define PTRAIN_PREBUILT_EXTERN_CLASS(...) extern template class __VA_ARGS__;
#else
#define PTRAIN_PREBUILT_EXTERN(...)
#define PTRAIN_PREBUILT_EXTERN_DECLARATION(...)
#define PTRAIN_PREBUILT_EXTERN_CLASS(...)
#endif
#define PTRAIN_PREBUILT_INSTANTIATE(...) template decltype(__VA_ARGS__) __VA_ARGS__;

#if defined(PTRAIN_PREBUILT_DEFINE_KERNELS)
#define PTRAIN_PREBUILT_KERNEL(...) PTRAIN_PREBUILT_INSTANTIATE(__VA_ARGS__)
#else
#define PTRAIN_PREBUILT_KERNEL(...) PTRAIN_PREBUILT_EXTERN(__VA_ARGS__)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_OPS)
#define PTRAIN_PREBUILT_OP(...) PTRAIN_PREBUILT_INSTANTIATE(__VA_ARGS__)
#define PTRAIN_PREBUILT_OP_DECLARATION(...) template __VA_ARGS__;
#else
#define PTRAIN_PREBUILT_OP(...) PTRAIN_PREBUILT_EXTERN(__VA_ARGS__)
#define PTRAIN_PREBUILT_OP_DECLARATION(...) PTRAIN_PREBUILT_EXTERN_DECLARATION(__VA_ARGS__)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_STATE)
#define PTRAIN_PREBUILT_STATE(...) PTRAIN_PREBUILT_INSTANTIATE(__VA_ARGS__)
#else
#define PTRAIN_PREBUILT_STATE(...) PTRAIN_PREBUILT_EXTERN(__VA_ARGS__)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_CLASSES)
#define PTRAIN_PREBUILT_CLASS(...) template class __VA_ARGS__;
#else
#define PTRAIN_PREBUILT_CLASS(...) PTRAIN_PREBUILT_EXTERN_CLASS(__VA_ARGS__)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_MODELS)
#define PTRAIN_PREBUILT_MODEL(...) template class __VA_ARGS__;
#else
#define PTRAIN_PREBUILT_MODEL(...) PTRAIN_PREBUILT_EXTERN_CLASS(__VA_ARGS__)
#endif

// The Trainer's loop (train/trainer.hpp: a class's and its member templates' specialisations, by
// their declarations; TRAINER: src/prebuilt/trainer.cpp).
#if defined(PTRAIN_PREBUILT_DEFINE_TRAINER)
#define PTRAIN_PREBUILT_TRAINER(...) template __VA_ARGS__;
#else
#define PTRAIN_PREBUILT_TRAINER(...) PTRAIN_PREBUILT_EXTERN_DECLARATION(__VA_ARGS__)
#endif

// The MPI Trainers' loops (the end of ptrain/mpi.hpp; TRAINER_MPI: src/prebuilt/trainer_mpi.cpp,
// in the library where it was built with MPI, which then gives its ptrain::mpi users
// PTRAIN_PREBUILT_MPI).
#if defined(PTRAIN_PREBUILT_DEFINE_TRAINER_MPI)
#define PTRAIN_PREBUILT_TRAINER_MPI(...) template __VA_ARGS__;
#elif defined(PTRAIN_PREBUILT_MPI)
#define PTRAIN_PREBUILT_TRAINER_MPI(...) PTRAIN_PREBUILT_EXTERN_DECLARATION(__VA_ARGS__)
#else
#define PTRAIN_PREBUILT_TRAINER_MPI(...)
#endif

#if defined(PTRAIN_PREBUILT_DEFINE_FUNCTIONS)
#define PTRAIN_PREBUILT_FUNCTION_BODIES 1
#define PTRAIN_PREBUILT_INLINE
#else
#define PTRAIN_PREBUILT_FUNCTION_BODIES (!PTRAIN_PREBUILT_IN_USE)
#define PTRAIN_PREBUILT_INLINE inline
#endif

// The same for the functions of the MPI headers (MpiSession, the collective watchdog), under
// PTRAIN_PREBUILT_MPI_FUNCTION_BODIES, each marked PTRAIN_PREBUILT_MPI_INLINE: defined in the
// library built with MPI (src/prebuilt/functions_mpi.cpp, PTRAIN_PREBUILT_DEFINE_MPI_FUNCTIONS),
// not seen by a program that takes them from there (ptrain::mpi's users: PTRAIN_PREBUILT_MPI).
#if defined(PTRAIN_PREBUILT_DEFINE_MPI_FUNCTIONS)
#define PTRAIN_PREBUILT_MPI_FUNCTION_BODIES 1
#define PTRAIN_PREBUILT_MPI_INLINE
#elif PTRAIN_PREBUILT_IN_USE && defined(PTRAIN_PREBUILT_MPI)
#define PTRAIN_PREBUILT_MPI_FUNCTION_BODIES 0
#define PTRAIN_PREBUILT_MPI_INLINE inline
#else
#define PTRAIN_PREBUILT_MPI_FUNCTION_BODIES 1
#define PTRAIN_PREBUILT_MPI_INLINE inline
#endif

// The lists stand after their header's namespace, so they name templates in full: ptrain::...
// A kernel's float and double specialisations; an op's, on the CPU; a state file's; a class's and
// a model's, on the CPU.
#define PTRAIN_PREBUILT_KERNELS_FD(f) PTRAIN_PREBUILT_KERNEL(f<float>) PTRAIN_PREBUILT_KERNEL(f<double>)
#define PTRAIN_PREBUILT_OPS_FD(f) PTRAIN_PREBUILT_OP(f<float, ::ptrain::Cpu>) PTRAIN_PREBUILT_OP(f<double, ::ptrain::Cpu>)
#define PTRAIN_PREBUILT_STATE_FD(f) PTRAIN_PREBUILT_STATE(f<float>) PTRAIN_PREBUILT_STATE(f<double>)
#define PTRAIN_PREBUILT_CLASSES_FD(c) \
  PTRAIN_PREBUILT_CLASS(c<float, ::ptrain::Cpu>) PTRAIN_PREBUILT_CLASS(c<double, ::ptrain::Cpu>)
#define PTRAIN_PREBUILT_MODELS_FD(c) \
  PTRAIN_PREBUILT_MODEL(c<float, ::ptrain::Cpu>) PTRAIN_PREBUILT_MODEL(c<double, ::ptrain::Cpu>)
