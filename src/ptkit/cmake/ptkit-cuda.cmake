# CUDA: find the toolkit (PyPI's nvidia-cuda-nvcc first, a system CUDA only when
# asked for), resolve the requested targets against what its nvcc can build, and
# compile with exactly those -gencode flags.
include_guard(GLOBAL)

set(PTKIT_CUDA_ROOT "$ENV{PTKIT_CUDA_ROOT}" CACHE PATH
    "CUDA toolkit root (bin/nvcc, include, lib); default: the pip toolkit of the build Python")
option(PTKIT_CUDA_USE_SYSTEM "Use the system CUDA toolkit (CUDAToolkit_ROOT or nvcc on PATH)" OFF)

# The oldest toolkit that can build each architecture, for the error message.
set(_PTKIT_CUDA_MIN_VERSION_90 "11.8")
set(_PTKIT_CUDA_MIN_VERSION_100 "12.8")
set(_PTKIT_CUDA_MIN_VERSION_103 "12.9")
set(_PTKIT_CUDA_MIN_VERSION_107 "13.5")
set(_PTKIT_CUDA_MIN_VERSION_110 "13.0")
set(_PTKIT_CUDA_MIN_VERSION_120 "12.8")
set(_PTKIT_CUDA_MIN_VERSION_121 "12.9")

# _ptkit_find_nvcc(<found_var> <reason_var>): on success sets PTKIT_NVCC,
# PTKIT_CUDA_TOOLKIT_ROOT, PTKIT_CUDA_VERSION, PTKIT_CUDA_FULL_VERSION and PTKIT_CUDA_SOURCE.
function(_ptkit_find_nvcc found_var reason_var)
  set(source "")
  set(root "${PTKIT_CUDA_ROOT}")
  if(root)
    set(source "PTKIT_CUDA_ROOT")
  elseif(PTKIT_CUDA_USE_SYSTEM)
    if(CUDAToolkit_ROOT)
      set(root "${CUDAToolkit_ROOT}")
    else()
      find_program(_system_nvcc nvcc NO_CACHE)
      if(_system_nvcc)
        execute_process(COMMAND "${_system_nvcc}" -v --version OUTPUT_QUIET ERROR_VARIABLE verbose)
        if(verbose MATCHES "#\\$ TOP=([^\r\n]*)")
          get_filename_component(root "${CMAKE_MATCH_1}" ABSOLUTE)
        else()
          get_filename_component(root "${_system_nvcc}" DIRECTORY)
          get_filename_component(root "${root}/.." ABSOLUTE)
        endif()
      endif()
    endif()
    set(source "system")
  else()
    # nvidia-cuda-nvcc installs nvidia/cu<major>/bin/nvcc into the build Python's site-packages.
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c [=[
import importlib.util, pathlib
spec = importlib.util.find_spec("nvidia")
roots = [pathlib.Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
found = sorted(n.parent.parent for r in roots for n in r.glob("cu*/bin/nvcc"))
print(found[-1].as_posix() if found else "")
]=]
      OUTPUT_VARIABLE root OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(source "pip")
  endif()
  if(NOT root OR NOT EXISTS "${root}/bin/nvcc")
    set(${found_var} FALSE PARENT_SCOPE)
    string(CONCAT reason
      "no CUDA toolkit found (looked for nvcc from pip in ${Python_EXECUTABLE}'s "
      "site-packages). Fix: install the recipe's toolkit: pip install 'nvidia-cuda-nvcc==13.5.*' "
      "'nvidia-cuda-runtime==13.5.*' 'nvidia-cuda-crt==13.5.*' 'nvidia-cuda-cccl==13.*', "
      "or set PTKIT_CUDA_ROOT to a toolkit, or -DPTKIT_CUDA_USE_SYSTEM=ON for the system CUDA")
    set(${reason_var} "${reason}" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${root}/bin/nvcc" --version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "release ([0-9]+\\.[0-9]+), V([0-9.]+)")
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "${root}/bin/nvcc --version failed: ${out}" PARENT_SCOPE)
    return()
  endif()
  set(${found_var} TRUE PARENT_SCOPE)
  set(PTKIT_NVCC "${root}/bin/nvcc" PARENT_SCOPE)
  set(PTKIT_CUDA_TOOLKIT_ROOT "${root}" PARENT_SCOPE)
  set(PTKIT_CUDA_VERSION "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(PTKIT_CUDA_FULL_VERSION "${CMAKE_MATCH_2}" PARENT_SCOPE)
  set(PTKIT_CUDA_SOURCE "${source}" PARENT_SCOPE)
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

# TORCH_CUDA_ARCH_LIST-style "9.0;10.0+PTX;9.0a" -> sm_90;sm_100;compute_100;sm_90a.
function(ptkit_parse_cuda_arch_list list out_var)
  string(REPLACE " " ";" list "${list}")
  set(result "")
  foreach(item IN LISTS list)
    if(item STREQUAL "")
      continue()
    endif()
    if(NOT item MATCHES "^([0-9]+)\\.([0-9])([af]?)(\\+PTX)?$")
      message(FATAL_ERROR "ptkit_parse_cuda_arch_list: PTKIT_CUDA_ARCHS entry '${item}' is not like 9.0, 10.0a, 12.0f or 12.0+PTX")
    endif()
    set(cc "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    list(APPEND result "sm_${cc}${CMAKE_MATCH_3}")
    if(CMAKE_MATCH_4)
      list(APPEND result "compute_${cc}${CMAKE_MATCH_3}")
    endif()
  endforeach()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

# ptkit_resolve_cuda_targets(REQUESTED <t>… [OPTIONAL <t>…] SASS_VAR <v> PTX_VAR <v>
#                            DROPPED_VAR <v> ERROR_VAR <v>)
# Intersects the requested targets with `nvcc --list-gpu-code/--list-gpu-arch`. A
# requested target the toolkit lacks sets ERROR_VAR to the reason and the fix (the
# caller fails the build with it), unless it is optional: then it is dropped with a
# warning and listed in DROPPED_VAR (for the manifest). Needs ptkit_enable_backend(cuda).
function(ptkit_resolve_cuda_targets)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SASS_VAR;PTX_VAR;DROPPED_VAR;ERROR_VAR" "REQUESTED;OPTIONAL")
  set(fn "ptkit_resolve_cuda_targets")
  _ptkit_check_arguments("${fn}" SASS_VAR PTX_VAR DROPPED_VAR ERROR_VAR)
  if(NOT arg_REQUESTED AND NOT arg_OPTIONAL)
    message(FATAL_ERROR "${fn}: REQUESTED or OPTIONAL is required (e.g. REQUESTED sm_90 compute_90)")
  endif()
  if(NOT PTKIT_NVCC)
    message(FATAL_ERROR "${fn}: no nvcc: call ptkit_enable_backend(cuda) first (at directory scope)")
  endif()
  execute_process(COMMAND "${PTKIT_NVCC}" --list-gpu-code OUTPUT_VARIABLE codes)
  execute_process(COMMAND "${PTKIT_NVCC}" --list-gpu-arch OUTPUT_VARIABLE archs)
  string(STRIP "${codes}" codes)
  string(STRIP "${archs}" archs)
  string(REGEX REPLACE "[\r\n]+" ";" supported "${codes}\n${archs}")
  string(REGEX REPLACE "[\r\n]+" " " codes_line "${codes}")
  set(sass "")
  set(ptx "")
  set(dropped "")
  set(error "")
  foreach(target IN LISTS arg_REQUESTED arg_OPTIONAL)
    if(NOT target MATCHES "^(sm|compute)_([0-9]+)([af]?)$")
      set(error "'${target}' is not a CUDA target (sm_90, sm_90a, sm_100f, compute_120)")
      break()
    endif()
    set(kind "${CMAKE_MATCH_1}")
    set(cc "${CMAKE_MATCH_2}")
    # nvcc lists base targets; an a/f variant exists wherever its base does (CUDA >= 12.9 for f).
    if(NOT "${kind}_${cc}" IN_LIST supported)
      if(target IN_LIST arg_OPTIONAL)
        list(APPEND dropped "${target}")
        message(WARNING "${fn}: optional CUDA target ${target} dropped: nvcc ${PTKIT_CUDA_FULL_VERSION} "
                        "at ${PTKIT_NVCC} cannot build it (recorded in the manifest)")
        continue()
      endif()
      set(need "a newer CUDA toolkit")
      if(DEFINED _PTKIT_CUDA_MIN_VERSION_${cc})
        set(need "CUDA >= ${_PTKIT_CUDA_MIN_VERSION_${cc}}")
      endif()
      string(CONCAT error
        "CUDA target ${target} needs ${need}; found ${PTKIT_CUDA_FULL_VERSION} at ${PTKIT_NVCC} "
        "(it builds: ${codes_line}). Fix: use the recipe's pip toolkit (pip install "
        "'nvidia-cuda-nvcc==13.5.*' … and unset PTKIT_CUDA_USE_SYSTEM), or mark ${target} "
        "optional in the recipe (targets.cuda-optional), or remove it from PTKIT_CUDA_ARCHS.")
      break()
    endif()
    if(kind STREQUAL "sm")
      list(APPEND sass "${target}")
    else()
      list(APPEND ptx "${target}")
    endif()
  endforeach()
  if(NOT error AND NOT sass AND NOT ptx)
    set(error "no CUDA target left to build (requested: ${arg_REQUESTED} ${arg_OPTIONAL})")
  endif()
  set(${arg_ERROR_VAR} "${error}" PARENT_SCOPE)
  set(${arg_SASS_VAR} "${sass}" PARENT_SCOPE)
  set(${arg_PTX_VAR} "${ptx}" PARENT_SCOPE)
  set(${arg_DROPPED_VAR} "${dropped}" PARENT_SCOPE)
endfunction()

# ptkit_target_cuda_archs(<target> [SASS <sm_…>…] [PTX <compute_…>…]): exactly these
# -gencode flags for the target's .cu sources, a compressed fatbinary
# (PTKIT_CUDA_COMPRESS_MODE), C++17. Needs ptkit_enable_backend(cuda).
function(ptkit_target_cuda_archs target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SASS;PTX")
  set(fn "ptkit_target_cuda_archs(${target})")
  _ptkit_check_arguments("${fn}")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: add_library(${target} MODULE …) first")
  endif()
  if(NOT arg_SASS AND NOT arg_PTX)
    message(FATAL_ERROR "${fn}: SASS or PTX is required (ptkit_resolve_cuda_targets gives both)")
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
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES OFF CUDA_RUNTIME_LIBRARY Shared
                        CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
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
