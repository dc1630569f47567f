# HIP (AMD GPUs): find the toolchain (ptkit.backends.hip's order: TheRock's pip SDK, then
# ROCM_PATH, then a system HIP), tell ptkit_resolve_targets which gfx targets its
# compiler builds, and compile .hip sources with it.
#
# .hip sources are compiled by hipcc through custom commands rather than CMake's HIP
# language: that needs a complete ROCm CMake layout (hip-lang, amd_comgr, device
# libraries where clang looks for them), which distribution packages such as Debian's
# do not provide, and one rule that works with every toolchain beats two.
include_guard(GLOBAL)

# -DPTKIT_HIP_ROOT=…; the environment variable PTKIT_HIP_ROOT, when set, replaces it on every
# configure and is never cached itself (_ptkit_toolkit_override in ptkit-python.cmake).
set(PTKIT_HIP_ROOT "" CACHE PATH
    "ROCm root holding bin/hipcc (default: TheRock's rocm-sdk, then ROCM_PATH, then hipcc on PATH)")

# _ptkit_find_hip(<found_var> <reason_var>): the toolchain ptkit.backends.hip finds
# (PTKIT_HIP_ROOT, TheRock's rocm-sdk, ROCM_PATH, hipcc on PATH, /opt/rocm), its version
# and its runtime. On success sets PTKIT_HIPCC, PTKIT_HIP_ROOT_DIR, PTKIT_HIP_VERSION,
# PTKIT_HIP_SOURCE and PTKIT_HIP_RUNTIME_LIBRARY in the caller, and PTKIT_HIP_CMAKE_PREFIX
# (TheRock's CMake packages) when TheRock's SDK is used.
function(_ptkit_find_hip found_var reason_var)
  set(${found_var} FALSE PARENT_SCOPE)
  _ptkit_locate_toolkit(hip toolkit)
  if(toolkit_REASON)
    set(${reason_var} "${toolkit_REASON}" PARENT_SCOPE)
    return()
  endif()
  set(hipcc "${toolkit_COMPILER}")
  set(root "${toolkit_ROOT}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env HIP_PLATFORM=amd "${hipcc}" --version
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "HIP version: ([0-9.]+)")
    set(${reason_var} "${hipcc} --version failed (${toolkit_SOURCE}): ${err}" PARENT_SCOPE)
    return()
  endif()
  set(version "${CMAKE_MATCH_1}")
  # The HIP runtime torch already loaded (DT_NEEDED libamdhip64.so.<major>, no RPATH).
  find_library(runtime NAMES amdhip64 PATHS "${root}/lib" "${root}/lib64" NO_CACHE)
  if(NOT runtime)
    set(${reason_var} "no libamdhip64 next to ${hipcc} (${toolkit_SOURCE}): install the HIP runtime development files (Debian: libamdhip64-dev)" PARENT_SCOPE)
    return()
  endif()
  # TheRock's SDK keeps its CMake packages (hip, hipblas …) in <root>/lib/cmake.
  if(toolkit_SOURCE MATCHES "TheRock" AND IS_DIRECTORY "${root}/lib/cmake")
    set(PTKIT_HIP_CMAKE_PREFIX "${root}/lib/cmake" PARENT_SCOPE)
  endif()
  set(${found_var} TRUE PARENT_SCOPE)
  set(${reason_var} "" PARENT_SCOPE)
  set(PTKIT_HIPCC "${hipcc}" PARENT_SCOPE)
  set(PTKIT_HIP_ROOT_DIR "${root}" PARENT_SCOPE)
  set(PTKIT_HIP_VERSION "${version}" PARENT_SCOPE)
  set(PTKIT_HIP_SOURCE "${toolkit_SOURCE}" PARENT_SCOPE)
  set(PTKIT_HIP_RUNTIME_LIBRARY "${runtime}" PARENT_SCOPE)
endfunction()

# _ptkit_hip_can_build(<target> <ok_var> <why_var>): compiles an empty kernel file for
# the target. The compiler itself is the only reliable list: a known processor name
# still fails when the toolchain lacks its device libraries (Debian's gfx1100).
function(_ptkit_hip_can_build target ok_var why_var)
  string(MAKE_C_IDENTIFIER "${PTKIT_HIPCC}-${PTKIT_HIP_VERSION}-${target}" key)
  if(NOT DEFINED PTKIT_HIP_PROBE_${key})
    set(dir "${CMAKE_BINARY_DIR}/ptkit-hip-probe")
    file(WRITE "${dir}/probe.hip" "#include <hip/hip_runtime.h>\n__global__ void ptkit_probe() {}\n")
    execute_process(
      COMMAND "${CMAKE_COMMAND}" -E env HIP_PLATFORM=amd "${PTKIT_HIPCC}" "--offload-arch=${target}"
              -c "${dir}/probe.hip" -o "${dir}/probe.o"
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    string(REGEX MATCH "error: [^;\n]*" first_error "${out}")
    set(PTKIT_HIP_PROBE_${key} "${rc}" CACHE INTERNAL "")
    set(PTKIT_HIP_PROBE_WHY_${key} "${first_error}" CACHE INTERNAL "")
  endif()
  if(PTKIT_HIP_PROBE_${key} EQUAL 0)
    set(${ok_var} TRUE PARENT_SCOPE)
  else()
    set(${ok_var} FALSE PARENT_SCOPE)
  endif()
  set(${why_var} "${PTKIT_HIP_PROBE_WHY_${key}}" PARENT_SCOPE)
endfunction()

# _ptkit_hip_buildable_targets(<requested> <supported_var> <compiler_var>): for
# ptkit_resolve_targets: the requested targets this hipcc compiles (a probe each; why
# each other one failed is printed, in the compiler's words).
function(_ptkit_hip_buildable_targets requested supported_var compiler_var)
  if(NOT PTKIT_HIPCC)
    message(FATAL_ERROR "ptkit_resolve_targets(hip): no hipcc: call ptkit_enable_backend(hip) first")
  endif()
  set(built "")
  foreach(target IN LISTS requested)
    _ptkit_hip_can_build("${target}" ok why)
    if(ok)
      list(APPEND built "${target}")
    else()
      message(STATUS "ptkit: hipcc ${PTKIT_HIP_VERSION} does not build ${target}: ${why}")
    endif()
  endforeach()
  set(${supported_var} "${built}" PARENT_SCOPE)
  set(${compiler_var} "HIP ${PTKIT_HIP_VERSION} at ${PTKIT_HIPCC} (${PTKIT_HIP_SOURCE})" PARENT_SCOPE)
endfunction()

# ptkit_target_hip_sources(<target> SOURCES <file.hip>… TARGETS <gfx…>… [INCLUDE_DIRS <dir>…]
#     [DEFINES <def>…])
# Compiles each source with hipcc for exactly these targets and adds the objects (host
# code plus a .hip_fatbin offload bundle) to <target>, which links the HIP runtime. The
# device code is torch-free: it gets INCLUDE_DIRS and DEFINES only.
function(ptkit_target_hip_sources target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;TARGETS;INCLUDE_DIRS;DEFINES")
  set(fn "ptkit_target_hip_sources(${target})")
  _ptkit_check_arguments("${fn}" SOURCES TARGETS)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: add_library(${target} MODULE …) first")
  endif()
  if(NOT PTKIT_HIPCC)
    message(FATAL_ERROR "${fn}: no hipcc: call ptkit_enable_backend(hip) first")
  endif()
  set(flags -std=c++17 -O3 -fPIC -fvisibility=hidden
            "-ffile-prefix-map=${CMAKE_SOURCE_DIR}=." "-ffile-prefix-map=${CMAKE_BINARY_DIR}=build")
  foreach(gfx IN LISTS arg_TARGETS)
    list(APPEND flags "--offload-arch=${gfx}")
  endforeach()
  foreach(dir IN LISTS arg_INCLUDE_DIRS)
    list(APPEND flags "-I${dir}")
  endforeach()
  foreach(define IN LISTS arg_DEFINES)
    list(APPEND flags "-D${define}")
  endforeach()
  set(objects "")
  foreach(source IN LISTS arg_SOURCES)
    get_filename_component(source "${source}" ABSOLUTE)
    get_filename_component(stem "${source}" NAME_WE)
    set(object "${CMAKE_CURRENT_BINARY_DIR}/${target}.hip/${stem}.o")
    add_custom_command(
      OUTPUT "${object}"
      # Debian's hipcc picks the NVIDIA platform when nvcc is installed; ptkit's HIP is AMD.
      COMMAND "${CMAKE_COMMAND}" -E env HIP_PLATFORM=amd
              "${PTKIT_HIPCC}" ${flags} -MD -MF "${object}.d" -c "${source}" -o "${object}"
      DEPENDS "${source}"
      DEPFILE "${object}.d"
      COMMENT "hipcc ${stem} for ${arg_TARGETS}"
      VERBATIM COMMAND_EXPAND_LISTS)
    list(APPEND objects "${object}")
  endforeach()
  set_source_files_properties(${objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${target} PRIVATE ${objects})
  target_link_libraries(${target} PRIVATE "${PTKIT_HIP_RUNTIME_LIBRARY}")
  # Objects only (a library of .hip sources alone) give CMake no language to link with.
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
endfunction()
