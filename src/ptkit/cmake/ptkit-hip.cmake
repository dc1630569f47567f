# HIP (AMD GPUs): find the toolchain (TheRock's pip SDK, then ROCM_PATH, then a system
# HIP), resolve the requested gfx targets against what its compiler can build, and
# compile .hip sources with it.
#
# .hip sources are compiled by hipcc through custom commands rather than CMake's HIP
# language: that needs a complete ROCm CMake layout (hip-lang, amd_comgr, device
# libraries where clang looks for them), which distribution packages such as Debian's
# do not provide, and one rule that works with every toolchain beats two.
include_guard(GLOBAL)

set(PTKIT_HIP_ROOT "$ENV{PTKIT_HIP_ROOT}" CACHE PATH
    "ROCm root holding bin/hipcc (default: TheRock's rocm-sdk, then ROCM_PATH, then hipcc on PATH)")

# The oldest ROCm whose compiler builds each target, for the error message.
set(_PTKIT_HIP_MIN_ROCM_gfx90a "4.5")
set(_PTKIT_HIP_MIN_ROCM_gfx942 "6.0")
set(_PTKIT_HIP_MIN_ROCM_gfx950 "7.0")
set(_PTKIT_HIP_MIN_ROCM_gfx1100 "5.5")
set(_PTKIT_HIP_MIN_ROCM_gfx1101 "5.5")
set(_PTKIT_HIP_MIN_ROCM_gfx1200 "6.4")
set(_PTKIT_HIP_MIN_ROCM_gfx1201 "6.4")

# _ptkit_find_hip(<found_var> <reason_var>): on success sets PTKIT_HIPCC, PTKIT_HIP_ROOT_DIR,
# PTKIT_HIP_VERSION, PTKIT_HIP_SOURCE and PTKIT_HIP_RUNTIME_LIBRARY in the caller (and
# PTKIT_HIP_CMAKE_PREFIX, `rocm-sdk path --cmake`, when TheRock's SDK is used).
function(_ptkit_find_hip found_var reason_var)
  set(root "")
  set(source "")
  if(PTKIT_HIP_ROOT)
    set(root "${PTKIT_HIP_ROOT}")
    set(source "PTKIT_HIP_ROOT")
  endif()
  # 1. TheRock: `rocm-sdk path --root` from the rocm-sdk package of the build Python
  #    (or a rocm-sdk on PATH).
  if(NOT root)
    get_filename_component(python_bin "${Python_EXECUTABLE}" DIRECTORY)
    find_program(_ptkit_rocm_sdk rocm-sdk HINTS "${python_bin}" NO_CACHE)
    if(_ptkit_rocm_sdk)
      execute_process(COMMAND "${_ptkit_rocm_sdk}" path --root OUTPUT_VARIABLE sdk_root
                      RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(rc EQUAL 0 AND EXISTS "${sdk_root}/bin/hipcc")
        set(root "${sdk_root}")
        set(source "TheRock rocm-sdk")
        execute_process(COMMAND "${_ptkit_rocm_sdk}" path --cmake OUTPUT_VARIABLE sdk_cmake
                        OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        if(sdk_cmake)
          set(PTKIT_HIP_CMAKE_PREFIX "${sdk_cmake}" PARENT_SCOPE)
        endif()
      endif()
    endif()
  endif()
  # 2. ROCM_PATH, 3. a system HIP (hipcc on PATH: /opt/rocm/bin, Debian's /usr/bin).
  if(NOT root AND DEFINED ENV{ROCM_PATH} AND EXISTS "$ENV{ROCM_PATH}/bin/hipcc")
    set(root "$ENV{ROCM_PATH}")
    set(source "ROCM_PATH")
  endif()
  if(NOT root)
    find_program(_ptkit_system_hipcc hipcc PATHS /opt/rocm/bin NO_CACHE)
    if(_ptkit_system_hipcc)
      get_filename_component(root "${_ptkit_system_hipcc}" DIRECTORY)
      get_filename_component(root "${root}/.." ABSOLUTE)
      set(source "system")
    endif()
  endif()
  if(NOT root OR NOT EXISTS "${root}/bin/hipcc")
    set(${found_var} FALSE PARENT_SCOPE)
    string(CONCAT reason
      "no HIP toolchain: no rocm-sdk next to ${Python_EXECUTABLE}, ROCM_PATH unset and no hipcc on "
      "PATH. Fix: pip install the recipe's ROCm SDK (TheRock: rocm[devel]) or apt install hipcc, "
      "or set PTKIT_HIP_ROOT")
    set(${reason_var} "${reason}" PARENT_SCOPE)
    return()
  endif()
  set(hipcc "${root}/bin/hipcc")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env HIP_PLATFORM=amd "${hipcc}" --version
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "HIP version: ([0-9.]+)")
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "${hipcc} --version failed (${source}): ${err}" PARENT_SCOPE)
    return()
  endif()
  set(version "${CMAKE_MATCH_1}")
  # The HIP runtime torch already loaded (DT_NEEDED libamdhip64.so.<major>, no RPATH).
  find_library(runtime NAMES amdhip64 PATHS "${root}/lib" "${root}/lib64" NO_CACHE)
  if(NOT runtime)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "no libamdhip64 next to ${hipcc} (${source}): install the HIP runtime development files (Debian: libamdhip64-dev)" PARENT_SCOPE)
    return()
  endif()
  set(${found_var} TRUE PARENT_SCOPE)
  set(PTKIT_HIPCC "${hipcc}" PARENT_SCOPE)
  set(PTKIT_HIP_ROOT_DIR "${root}" PARENT_SCOPE)
  set(PTKIT_HIP_VERSION "${version}" PARENT_SCOPE)
  set(PTKIT_HIP_SOURCE "${source}" PARENT_SCOPE)
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

# ptkit_resolve_hip_targets(REQUESTED <gfx…>… [OPTIONAL <gfx…>…] TARGETS_VAR <v>
#                           DROPPED_VAR <v> ERROR_VAR <v>)
# Requested targets the compiler cannot build set ERROR_VAR (the caller fails the
# build); optional ones are dropped with a warning and recorded in the manifest.
function(ptkit_resolve_hip_targets)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TARGETS_VAR;DROPPED_VAR;ERROR_VAR" "REQUESTED;OPTIONAL")
  set(fn "ptkit_resolve_hip_targets")
  _ptkit_check_arguments("${fn}" TARGETS_VAR DROPPED_VAR ERROR_VAR)
  if(NOT arg_REQUESTED AND NOT arg_OPTIONAL)
    message(FATAL_ERROR "${fn}: REQUESTED or OPTIONAL is required (e.g. REQUESTED gfx942 gfx1100)")
  endif()
  if(NOT PTKIT_HIPCC)
    message(FATAL_ERROR "${fn}: no hipcc: call ptkit_enable_backend(hip) first")
  endif()
  set(built "")
  set(dropped "")
  set(error "")
  foreach(target IN LISTS arg_REQUESTED arg_OPTIONAL)
    if(NOT target MATCHES "^gfx[0-9a-f]+(-[0-9]+)*(-generic)?(:[a-z]+[+-])*$")
      set(error "'${target}' is not an AMD GPU target (gfx90a, gfx942, gfx1100, gfx9-4-generic, gfx90a:xnack+)")
      break()
    endif()
    _ptkit_hip_can_build("${target}" ok why)
    if(ok)
      list(APPEND built "${target}")
    elseif(target IN_LIST arg_OPTIONAL)
      list(APPEND dropped "${target}")
      message(WARNING "${fn}: optional HIP target ${target} dropped: HIP ${PTKIT_HIP_VERSION} at "
                      "${PTKIT_HIPCC} cannot build it (${why}); recorded in the manifest")
    else()
      string(REGEX REPLACE ":.*$" "" processor "${target}")
      set(need "a newer ROCm")
      if(DEFINED _PTKIT_HIP_MIN_ROCM_${processor})
        set(need "ROCm >= ${_PTKIT_HIP_MIN_ROCM_${processor}}")
      endif()
      string(CONCAT error
        "HIP target ${target} needs ${need}; found HIP ${PTKIT_HIP_VERSION} at ${PTKIT_HIPCC} "
        "(${PTKIT_HIP_SOURCE}; the compiler said: ${why}). Fix: use the recipe's ROCm SDK "
        "(TheRock, `rocm-sdk path --root`), or set PTKIT_HIP_TARGETS to targets this compiler "
        "builds, or mark ${target} optional in the recipe (targets.hip-optional).")
      break()
    endif()
  endforeach()
  if(NOT error AND NOT built)
    set(error "no HIP target left to build (requested: ${arg_REQUESTED} ${arg_OPTIONAL})")
  endif()
  set(${arg_TARGETS_VAR} "${built}" PARENT_SCOPE)
  set(${arg_DROPPED_VAR} "${dropped}" PARENT_SCOPE)
  set(${arg_ERROR_VAR} "${error}" PARENT_SCOPE)
endfunction()

# ptkit_target_hip_sources(<target> SOURCES <file.hip>… TARGETS <gfx…>… [INCLUDE_DIRS <dir>…])
# Compiles each source with hipcc for exactly these targets and adds the objects (host
# code plus a .hip_fatbin offload bundle) to <target>, which links the HIP runtime.
function(ptkit_target_hip_sources target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;TARGETS;INCLUDE_DIRS")
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
