# Locate torch's headers and libraries (without importing torch) and apply one of the two
# ways a library binds to it (ptkit.torch_abi): the LibTorch stable ABI
# (ptkit_target_stable_abi) or the classic C++ API without Python (ptkit_target_torch_abi).
include_guard(GLOBAL)

# Where torch is and what it was built with: ROOT, VERSION, CUDA, HIP, CXX11_ABI (1, 0 or
# empty where libstdc++'s choice does not apply), CXX_STANDARD (what torch's own CMake
# config asks of its users), as PTKIT_TORCH_<KEY>.
# A cross build names the target platform's torch (an unpacked wheel's torch folder: its
# headers and libtorch_cpu.dylib or torch_cpu.lib), since the build Python's is this
# machine's; empty: the build Python's torch.
set(PTKIT_TARGET_TORCH "$ENV{PTKIT_TARGET_TORCH}" CACHE PATH
    "torch package folder of the target platform (cross builds); empty: the build Python's torch")
if(PTKIT_TARGET_TORCH)
  _ptkit_python_tool(PTKIT_TORCH_ "ptkit: cannot use the target torch"
                     -m ptkit.torch_abi locate --target "${PTKIT_TARGET_TORCH}")
else()
  _ptkit_python_tool(PTKIT_TORCH_ "ptkit: cannot locate torch with ${Python_EXECUTABLE}"
                     -m ptkit.torch_abi locate)
endif()
set(PTKIT_TORCH_INCLUDE_DIR "${PTKIT_TORCH_ROOT}/include")
# The classic C++ API's second include folder (torch/all.h, torch/torch.h).
set(PTKIT_TORCH_API_INCLUDE_DIR "${PTKIT_TORCH_INCLUDE_DIR}/torch/csrc/api/include")
if(NOT EXISTS "${PTKIT_TORCH_INCLUDE_DIR}/torch/csrc/stable/library.h")
  message(FATAL_ERROR "ptkit: torch ${PTKIT_TORCH_VERSION} at ${PTKIT_TORCH_ROOT} has no stable-ABI "
                      "headers (torch/csrc/stable/library.h); install torch >= 2.10")
endif()
if(PTKIT_TORCH_VERSION MATCHES "^([0-9]+\\.[0-9]+)")
  # The minor a torch-mode library is built for, and loads into.
  set(PTKIT_TORCH_MAJOR_MINOR "${CMAKE_MATCH_1}")
endif()
find_library(PTKIT_TORCH_CPU_LIBRARY NAMES torch_cpu PATHS "${PTKIT_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
message(STATUS "ptkit: torch ${PTKIT_TORCH_VERSION} (headers and libtorch_cpu) at ${PTKIT_TORCH_ROOT}")

# -DPTKIT_ABI=stable|torch: the ABI mode of every ptkit_add_kernel_library call that names
# none; empty: the recipe's abi (PTKIT_RECIPE_ABI, after ptkit_read_recipe), else stable.
set(PTKIT_ABI "" CACHE STRING
    "ABI mode of the kernel libraries: stable (LibTorch stable ABI) or torch (the classic C++ API, one torch minor); empty: the recipe's, else stable")

# _ptkit_abi_guards(<target> <abi>): an include folder searched before torch's, whose
# headers stand in for those a library of <abi> cannot include (torch/extension.h in the
# torch mode; torch/all.h, torch/library.h … in the stable one): the compiler stops at
# them with ptkit's reason and fix (ptkit.torch_abi writes them), even where a header,
# not a source, includes them.
function(_ptkit_abi_guards target abi)
  set(dir "${CMAKE_BINARY_DIR}/ptkit-abi-guards/${abi}")
  get_property(written GLOBAL PROPERTY PTKIT_ABI_GUARDS_${abi})
  if(NOT written)  # once per configure: the text follows this ptkit's ptkit.torch_abi
    _ptkit_python_tool(guard_ "ptkit_target_${abi}_abi(${target})" -m ptkit.torch_abi guards ${abi} "${dir}")
    set_property(GLOBAL PROPERTY PTKIT_ABI_GUARDS_${abi} TRUE)
  endif()
  # Not SYSTEM: -I folders are searched before torch's -isystem ones.
  target_include_directories(${target} BEFORE PRIVATE "${dir}")
endfunction()

# _ptkit_torch_library_common(<target>): what every kernel library needs, whatever its
# ABI: hidden visibility, the platform's file name (libx.so, libx.dylib, x.dll), link-time
# failure on a missing symbol, reproducible file names in the binary, no RPATH.
function(_ptkit_torch_library_common target)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    PREFIX "${PTKIT_LIBRARY_PREFIX}" SUFFIX "${PTKIT_LIBRARY_SUFFIX}")
  target_link_libraries(${target} PRIVATE "${PTKIT_TORCH_CPU_LIBRARY}")
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # Fail at link time on a missing symbol rather than at dlopen on a user's machine.
    target_link_options(${target} PRIVATE "LINKER:--no-undefined" "LINKER:--as-needed")
  elseif(APPLE)
    # The same on macOS (ld64's default for a dylib, said once here); torch's libraries
    # are found through the loading process's @rpath, never a build machine's path.
    target_link_options(${target} PRIVATE "LINKER:-undefined,error")
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    # Reproducible objects: no build-directory paths in the binary.
    # torch's headers are named relative to torch's root, so wheels built in different
    # environments agree byte for byte.
    target_compile_options(${target} PRIVATE "-ffile-prefix-map=${CMAKE_SOURCE_DIR}=."
                           "-ffile-prefix-map=${PTKIT_TORCH_ROOT}=torch")
  endif()
  # The installed library must find libtorch through the process that loads it
  # (torch is imported first), never through a path from the build machine.
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "" SKIP_BUILD_RPATH OFF)
endfunction()

# ptkit_target_stable_abi(<target> [TORCH_TARGET_VERSION <x.y>])
# Headers of torch's stable ABI only (TORCH_STABLE_ONLY rejects the others), linked
# against libtorch_cpu for the C shim: no libpython, no libtorch_python. The library
# loads into any torch >= TORCH_TARGET_VERSION (default PTKIT_DEFAULT_TORCH_TARGET_VERSION).
function(ptkit_target_stable_abi target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TORCH_TARGET_VERSION" "")
  set(fn "ptkit_target_stable_abi(${target})")
  _ptkit_check_arguments("${fn}")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: add_library(${target} MODULE …) first")
  endif()
  if(NOT arg_TORCH_TARGET_VERSION)
    set(arg_TORCH_TARGET_VERSION "${PTKIT_DEFAULT_TORCH_TARGET_VERSION}")
  endif()
  if(NOT arg_TORCH_TARGET_VERSION MATCHES "^([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "${fn}: TORCH_TARGET_VERSION must look like "
                        "2.10, got '${arg_TORCH_TARGET_VERSION}'")
  endif()
  # "2.10" -> 0x020a000000000000, the encoding of torch/headeronly/version.h.
  math(EXPR major_minor "(${CMAKE_MATCH_1} << 8) | ${CMAKE_MATCH_2}" OUTPUT_FORMAT HEXADECIMAL)
  string(REGEX REPLACE "^0x" "" hex "${major_minor}")
  string(LENGTH "${hex}" len)
  math(EXPR pad_len "4 - ${len}")
  string(REPEAT "0" ${pad_len} pad)
  target_compile_definitions(${target} PRIVATE
    "TORCH_TARGET_VERSION=0x${pad}${hex}000000000000ULL" TORCH_STABLE_ONLY)
  _ptkit_abi_guards(${target} stable)
  target_include_directories(${target} SYSTEM PRIVATE "${PTKIT_TORCH_INCLUDE_DIR}")
  target_compile_features(${target} PRIVATE cxx_std_17)
  _ptkit_torch_library_common(${target})
endfunction()

# ptkit_target_torch_abi(<target> [BACKEND cpu|cuda|hip|xpu])
# torch's classic C++ API without Python: torch's include folders (include and
# include/torch/csrc/api/include: torch/all.h, torch/library.h, ATen, c10), the
# _GLIBCXX_USE_CXX11_ABI torch was built with and the C++ standard it asks for, linked to
# libtorch_cpu and libc10 (and the backend's libtorch_<backend>, libc10_<backend>), never
# to libpython or libtorch_python; a torch/extension.h include (it pulls in Python.h)
# stops the compiler with the fix. No TORCH_STABLE_ONLY. The library loads into
# torch ${PTKIT_TORCH_MAJOR_MINOR} only: a release builds one wheel per torch minor.
function(ptkit_target_torch_abi target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "BACKEND" "")
  set(fn "ptkit_target_torch_abi(${target})")
  _ptkit_check_arguments("${fn}")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: add_library(${target} MODULE …) first")
  endif()
  if(NOT arg_BACKEND)
    set(arg_BACKEND cpu)
  endif()
  _ptkit_abi_guards(${target} torch)
  target_include_directories(${target} SYSTEM PRIVATE "${PTKIT_TORCH_INCLUDE_DIR}"
                             "${PTKIT_TORCH_API_INCLUDE_DIR}")
  if(NOT PTKIT_TORCH_CXX11_ABI STREQUAL "")
    # torch's C++ symbols name std::string one way or the other: the same as torch's.
    target_compile_definitions(${target} PRIVATE "_GLIBCXX_USE_CXX11_ABI=${PTKIT_TORCH_CXX11_ABI}")
  endif()
  set_target_properties(${target} PROPERTIES CXX_STANDARD ${PTKIT_TORCH_CXX_STANDARD}
                        CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  find_library(PTKIT_TORCH_C10_LIBRARY NAMES c10 PATHS "${PTKIT_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
  set(libraries "${PTKIT_TORCH_C10_LIBRARY}")
  if(NOT arg_BACKEND STREQUAL "cpu")
    # libtorch_cuda/libc10_cuda, libtorch_hip/libc10_hip, libtorch_xpu/libc10_xpu.
    foreach(stem torch c10)
      string(TOUPPER "PTKIT_TORCH_${stem}_${arg_BACKEND}_LIBRARY" var)
      find_library(${var} NAMES ${stem}_${arg_BACKEND} PATHS "${PTKIT_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
      if(NOT ${var})
        message(FATAL_ERROR "${fn}: torch ${PTKIT_TORCH_VERSION} has no lib${stem}_${arg_BACKEND}: "
                            "build the ${arg_BACKEND} library against a ${arg_BACKEND} build of torch")
      endif()
      list(APPEND libraries "${${var}}")
    endforeach()
  endif()
  target_link_libraries(${target} PRIVATE ${libraries})
  if(arg_BACKEND STREQUAL "cuda")
    # What torch's own extension builds give nvcc: c10::Half and __half must not both
    # convert implicitly (ambiguous overloads in ATen's headers).
    target_compile_options(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:-D__CUDA_NO_HALF_OPERATORS__;-D__CUDA_NO_HALF_CONVERSIONS__;-D__CUDA_NO_BFLOAT16_CONVERSIONS__;-D__CUDA_NO_HALF2_OPERATORS__>")
  endif()
  _ptkit_torch_library_common(${target})
  message(STATUS "ptkit: ${target}: ABI torch, the classic C++ API of torch ${PTKIT_TORCH_VERSION} "
                 "(C++${PTKIT_TORCH_CXX_STANDARD}, _GLIBCXX_USE_CXX11_ABI=${PTKIT_TORCH_CXX11_ABI}): "
                 "it loads into torch ${PTKIT_TORCH_MAJOR_MINOR} only")
endfunction()
