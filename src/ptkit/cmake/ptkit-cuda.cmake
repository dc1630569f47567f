# CUDA: find the toolkit (ptkit.backends.cuda's order: PyPI's nvidia-cuda-nvcc on the build
# Python's path, then in ptkit's toolchain cache; a system CUDA only when asked for), tell ptkit_resolve_targets what its nvcc builds, and
# compile with exactly the resolved -gencode flags.
include_guard(GLOBAL)

# -DPTKIT_CUDA_ROOT=…; the environment variable PTKIT_CUDA_ROOT, when set, replaces it on every
# configure and is never cached itself (_ptkit_toolkit_override in ptkit-python.cmake).
set(PTKIT_CUDA_ROOT "" CACHE PATH
    "CUDA toolkit root (bin/nvcc, include, lib); default: pip's toolkit on the build Python's path, then ptkit's toolchain cache")
option(PTKIT_CUDA_USE_SYSTEM "Use the system CUDA toolkit (nvcc on PATH) when no pip toolkit is found" OFF)

# _ptkit_find_nvcc(<found_var> <reason_var>): the toolkit ptkit.backends.cuda finds
# (PTKIT_CUDA_ROOT, else pip's nvidia/cu*/bin/nvcc on the build Python's path, else the
# system's nvcc with PTKIT_CUDA_USE_SYSTEM) and its version. On success sets PTKIT_NVCC,
# PTKIT_CUDA_TOOLKIT_ROOT, PTKIT_CUDA_VERSION, PTKIT_CUDA_FULL_VERSION and
# PTKIT_CUDA_SOURCE in the caller.
function(_ptkit_find_nvcc found_var reason_var)
  set(${found_var} FALSE PARENT_SCOPE)
  _ptkit_locate_toolkit(cuda toolkit)
  if(toolkit_REASON)
    set(${reason_var} "${toolkit_REASON}" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${toolkit_COMPILER}" --version OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "release ([0-9]+\\.[0-9]+), V([0-9.]+)")
    set(${reason_var} "${toolkit_COMPILER} --version failed (${toolkit_SOURCE}): ${out}${err}" PARENT_SCOPE)
    return()
  endif()
  set(${found_var} TRUE PARENT_SCOPE)
  set(${reason_var} "" PARENT_SCOPE)
  set(PTKIT_NVCC "${toolkit_COMPILER}" PARENT_SCOPE)
  set(PTKIT_CUDA_TOOLKIT_ROOT "${toolkit_ROOT}" PARENT_SCOPE)
  set(PTKIT_CUDA_VERSION "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(PTKIT_CUDA_FULL_VERSION "${CMAKE_MATCH_2}" PARENT_SCOPE)
  set(PTKIT_CUDA_SOURCE "${toolkit_SOURCE}" PARENT_SCOPE)
endfunction()

# _ptkit_enable_cuda_language(): after _ptkit_find_nvcc succeeded. A macro:
# enable_language must run at directory scope.
macro(_ptkit_enable_cuda_language)
  set(CMAKE_CUDA_COMPILER "${PTKIT_NVCC}")
  set(CUDAToolkit_ROOT "${PTKIT_CUDA_TOOLKIT_ROOT}")
  # Targets are passed as explicit -gencode flags (ptkit_target_cuda_archs), so CMake's
  # own architecture handling stays off.
  set(CMAKE_CUDA_ARCHITECTURES OFF)
  enable_language(CUDA)
  message(STATUS "ptkit: CUDA ${PTKIT_CUDA_FULL_VERSION} (${PTKIT_CUDA_SOURCE}) at ${PTKIT_CUDA_TOOLKIT_ROOT}")
endmacro()

# _ptkit_cuda_buildable_targets(<requested> <supported_var> <compiler_var>): for
# ptkit_resolve_targets: what this nvcc builds (`nvcc --list-gpu-code` SASS and
# `--list-gpu-arch` PTX; the a/f variants are ptkit.backends.cuda's business).
function(_ptkit_cuda_buildable_targets requested supported_var compiler_var)
  if(NOT PTKIT_NVCC)
    message(FATAL_ERROR "ptkit_resolve_targets(cuda): no nvcc: call ptkit_enable_backend(cuda) first "
                        "(at directory scope)")
  endif()
  execute_process(COMMAND "${PTKIT_NVCC}" --list-gpu-code OUTPUT_VARIABLE codes)
  execute_process(COMMAND "${PTKIT_NVCC}" --list-gpu-arch OUTPUT_VARIABLE archs)
  string(STRIP "${codes}\n${archs}" listed)
  string(REGEX REPLACE "[ \t\r\n]+" ";" listed "${listed}")
  set(${supported_var} "${listed}" PARENT_SCOPE)
  set(${compiler_var} "nvcc ${PTKIT_CUDA_FULL_VERSION} at ${PTKIT_NVCC} (${PTKIT_CUDA_SOURCE})" PARENT_SCOPE)
endfunction()

# ptkit_target_cuda_archs(<target> [SASS <sm_…>…] [PTX <compute_…>…]): exactly these
# -gencode flags for the target's .cu sources, a compressed fatbinary
# (PTKIT_CUDA_COMPRESS_MODE), C++17 (or the target's CXX_STANDARD). Needs
# ptkit_enable_backend(cuda).
function(ptkit_target_cuda_archs target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SASS;PTX")
  set(fn "ptkit_target_cuda_archs(${target})")
  _ptkit_check_arguments("${fn}")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: add_library(${target} MODULE …) first")
  endif()
  if(NOT arg_SASS AND NOT arg_PTX)
    message(FATAL_ERROR "${fn}: SASS or PTX is required (ptkit_resolve_targets(cuda) gives both)")
  endif()
  if(NOT CMAKE_CUDA_COMPILER_LOADED)
    message(FATAL_ERROR "${fn}: CUDA is not enabled: call ptkit_enable_backend(cuda) first (at directory scope)")
  endif()
  set(flags "")
  foreach(sm IN LISTS arg_SASS)
    string(REPLACE "sm_" "compute_" virtual "${sm}")
    list(APPEND flags "SHELL:-gencode arch=${virtual},code=${sm}")
  endforeach()
  foreach(compute IN LISTS arg_PTX)
    list(APPEND flags "SHELL:-gencode arch=${compute},code=${compute}")
  endforeach()
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:${flags}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:--compress-mode=${PTKIT_CUDA_COMPRESS_MODE}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>")
  # C++17, or the standard the target's C++ asks for (ABI torch: torch's, C++20).
  get_target_property(standard ${target} CXX_STANDARD)
  if(NOT standard)
    set(standard 17)
  endif()
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES OFF CUDA_RUNTIME_LIBRARY Shared
                        CUDA_STANDARD ${standard} CUDA_STANDARD_REQUIRED ON)
endfunction()

set(PTKIT_CUDA_COMPRESS_MODE "size" CACHE STRING
    "nvcc --compress-mode for the fatbinary: size (smallest wheel), balance, speed, none")

# ptkit_target_cuda_runtime(<target>): the host side of a CUDA kernel library: USE_CUDA,
# cuda_runtime_api.h for host-compiled files, torch's CUDA shim (libtorch_cuda) and the
# shared CUDA runtime that torch has already loaded (DT_NEEDED libcudart.so.<major>, no
# RPATH), so the wheel carries no second copy. Needs ptkit_enable_backend(cuda).
function(ptkit_target_cuda_runtime target)
  set(fn "ptkit_target_cuda_runtime(${target})")
  if(ARGN)
    message(FATAL_ERROR "${fn}: unknown arguments: ${ARGN}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: add_library(${target} MODULE …) first")
  endif()
  if(NOT PTKIT_CUDA_TOOLKIT_ROOT OR NOT CMAKE_CUDA_COMPILER_LOADED)
    message(FATAL_ERROR "${fn}: CUDA is not enabled: call ptkit_enable_backend(cuda) first (at directory scope)")
  endif()
  target_compile_definitions(${target} PRIVATE USE_CUDA)
  # cuda_runtime_api.h for host-compiled files.
  target_include_directories(${target} SYSTEM PRIVATE ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
  # pip's runtime ships only the versioned file name; pip's toolkit keeps it in lib/,
  # a system toolkit in lib64/ or targets/<arch>/lib.
  set(cudart "")
  foreach(dir "${PTKIT_CUDA_TOOLKIT_ROOT}/lib" "${PTKIT_CUDA_TOOLKIT_ROOT}/lib64"
              ${CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES})
    file(GLOB found "${dir}/libcudart.so.[0-9]*")
    list(FILTER found INCLUDE REGEX "libcudart\\.so\\.[0-9]+$")
    list(APPEND cudart ${found})
  endforeach()
  if(NOT cudart)
    message(FATAL_ERROR "${fn}: no libcudart.so.<major> in ${PTKIT_CUDA_TOOLKIT_ROOT}: "
                        "pip install 'nvidia-cuda-runtime==${PTKIT_CUDA_VERSION}.*'")
  endif()
  list(GET cudart 0 cudart)
  find_library(PTKIT_TORCH_CUDA_LIBRARY NAMES torch_cuda PATHS "${PTKIT_TORCH_ROOT}/lib" NO_DEFAULT_PATH)
  if(NOT PTKIT_TORCH_CUDA_LIBRARY)
    message(FATAL_ERROR "${fn}: torch ${PTKIT_TORCH_VERSION} has no libtorch_cuda: build the CUDA "
                        "library against a CUDA build of torch (e.g. torch==2.14.1 from PyPI)")
  endif()
  target_link_libraries(${target} PRIVATE "${PTKIT_TORCH_CUDA_LIBRARY}" "${cudart}")
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY None)
endfunction()
