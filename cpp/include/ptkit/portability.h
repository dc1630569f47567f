// What differs between the compilers ptkit's C++ is built with (GCC, Clang, MSVC), said once.
#pragma once

// A C entry point the loader finds by name (ctypes): exported from a DLL on Windows,
// default visibility where the build hides everything else (-fvisibility=hidden).
#if defined(_WIN32)
#define PTKIT_EXPORT __declspec(dllexport)
#else
#define PTKIT_EXPORT __attribute__((visibility("default")))
#endif

// Inlined even at -O0 or where the compiler judges a helper too large.
#if defined(_MSC_VER) && !defined(__clang__)
#define PTKIT_INLINE __forceinline
#else
#define PTKIT_INLINE inline __attribute__((always_inline))
#endif
