# XPU (Intel GPUs): find the oneAPI DPC++ compiler (icpx) and compile SYCL sources
# with it, ahead of time for the recipe's devices (plus SPIR-V for JIT when asked),
# into objects that the ordinary C++ linker links into the kernel library.
#
# Why custom commands and not enable_language: CMake has one C++ compiler per
# project, and ptkit's is the host compiler (g++/clang++) that builds the op layer
# and the CPU library; icpx cannot be a second CXX compiler beside it. So each SYCL
# source is compiled by an add_custom_command calling icpx, then icpx's device-link
# step (-fsycl-link) wraps the device images into one more host object; both go into
# the target as external objects, and the host linker links them with libsycl.
include_guard(GLOBAL)
# An empty keyword value stays an empty string in cmake_parse_arguments.
if(POLICY CMP0174)
  cmake_policy(SET CMP0174 NEW)
endif()

# -DPTKIT_ICPX=…; the environment variable PTKIT_ICPX, when set, replaces it on every
# configure and is never cached itself (_ptkit_toolkit_override in ptkit-python.cmake).
set(PTKIT_ICPX "" CACHE FILEPATH
    "icpx (Intel oneAPI DPC++/C++ compiler) for SYCL sources; default: CMPLR_ROOT, ONEAPI_ROOT, /opt/intel/oneapi, PATH")

# The fix of an icpx that was found but does not work (a compiler not found at all gets
# ptkit.backends.xpu's fix).
set(_PTKIT_ICPX_FIX
    "repair that oneAPI install (`source /opt/intel/oneapi/setvars.sh` sets its environment), or point PTKIT_ICPX at a working icpx")

# _ptkit_icpx_version(<icpx> <version_var> <error_var>): "2025.1.0" from the first line
# of `icpx --version` ("Intel(R) oneAPI DPC++/C++ Compiler 2025.1.0 (2025.1.0.20250317)");
# "unknown" for an icpx that runs but words it otherwise; <error_var> set when it does not run.
function(_ptkit_icpx_version icpx version_var error_var)
  execute_process(COMMAND "${icpx}" --version RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  set(version "")
  set(error "")
  if(NOT rc EQUAL 0)
    string(REGEX REPLACE "[\r\n].*" "" err "${err}")
    set(error "${icpx} --version failed (${rc}: ${err})")
  elseif(out MATCHES "Compiler ([0-9]+\\.[0-9]+(\\.[0-9]+)*)")
    set(version "${CMAKE_MATCH_1}")
  else()
    set(version "unknown")
  endif()
  set(${version_var} "${version}" PARENT_SCOPE)
  set(${error_var} "${error}" PARENT_SCOPE)
endfunction()

# ptkit_find_xpu_compiler(FOUND_VAR <v> REASON_VAR <v>)
# Finds icpx where ptkit.backends.xpu looks (PTKIT_ICPX, cache variable or environment:
# that one or none; then CMPLR_ROOT, ONEAPI_ROOT, /opt/intel/oneapi, PATH) and runs
# `icpx --version`. Found: <FOUND_VAR> TRUE, <REASON_VAR> empty, and PTKIT_ICPX (the
# path) and PTKIT_ICPX_VERSION ("2025.1.0", or "unknown") set in the caller's scope.
# Not found, or found but not runnable: <FOUND_VAR> FALSE and <REASON_VAR> one line
# saying where it looked and how to fix it. Never an error: the caller decides whether
# a missing XPU compiler skips the XPU library or fails the build.
function(ptkit_find_xpu_compiler)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "FOUND_VAR;REASON_VAR" "")
  if(NOT arg_FOUND_VAR OR NOT arg_REASON_VAR OR arg_UNPARSED_ARGUMENTS)
    # A mistake in the calling CMakeLists, not in the machine: say so at once.
    message(FATAL_ERROR "ptkit_find_xpu_compiler: usage: ptkit_find_xpu_compiler(FOUND_VAR <var> "
                        "REASON_VAR <var>), got: ${ARGV}")
  endif()
  set(${arg_FOUND_VAR} FALSE PARENT_SCOPE)
  _ptkit_locate_toolkit(xpu toolkit)
  if(toolkit_REASON)
    set(${arg_REASON_VAR} "${toolkit_REASON}" PARENT_SCOPE)
    return()
  endif()
  _ptkit_icpx_version("${toolkit_COMPILER}" version error)
  if(error)
    set(${arg_REASON_VAR} "${error}; ${_PTKIT_ICPX_FIX}" PARENT_SCOPE)
    return()
  endif()
  set(${arg_FOUND_VAR} TRUE PARENT_SCOPE)
  set(${arg_REASON_VAR} "" PARENT_SCOPE)
  set(PTKIT_ICPX "${toolkit_COMPILER}" PARENT_SCOPE)
  set(PTKIT_ICPX_VERSION "${version}" PARENT_SCOPE)
  message(STATUS "ptkit: icpx ${version} at ${toolkit_COMPILER} (${toolkit_SOURCE})")
endfunction()

# _ptkit_xpu_target_flags(<devices> <jit> <targets_var> <backend_var>)
# -fsycl-targets for both steps; the AOT device list for the device link, for
# spir64_gen alone (the JIT target spir64 gets no -device: its SPIR-V is compiled by
# the driver on the user's machine).
function(_ptkit_xpu_target_flags devices jit targets_var backend_var)
  set(targets "")
  set(backend "")
  if(devices)
    list(JOIN devices "," device_list)
    list(APPEND targets spir64_gen)
    set(backend "-Xsycl-target-backend=spir64_gen" "-device ${device_list}")
  endif()
  if(jit)
    list(APPEND targets spir64)
  endif()
  list(JOIN targets "," targets)
  set(${targets_var} "-fsycl-targets=${targets}" PARENT_SCOPE)
  set(${backend_var} "${backend}" PARENT_SCOPE)
endfunction()

# _ptkit_sycl_library(<out_var>): libsycl.so of the icpx in PTKIT_ICPX
# (<icpx>/../lib, following a symlinked icpx to its install).
function(_ptkit_sycl_library out_var)
  file(REAL_PATH "${PTKIT_ICPX}" icpx_real)
  get_filename_component(bin_dir "${icpx_real}" DIRECTORY)
  get_filename_component(lib_dir "${bin_dir}/../lib" ABSOLUTE)
  find_library(sycl NAMES sycl PATHS "${lib_dir}" NO_DEFAULT_PATH NO_CACHE)
  if(NOT sycl)
    message(FATAL_ERROR "ptkit: no libsycl.so in ${lib_dir} (next to ${PTKIT_ICPX}): that icpx "
                        "is not a complete oneAPI DPC++ install; ${_PTKIT_ICPX_FIX}")
  endif()
  set(${out_var} "${sycl}" PARENT_SCOPE)
endfunction()

# _ptkit_check_ocloc(): AOT for spir64_gen runs ocloc (the GPU driver's offline
# compiler), which icpx looks up next to itself and on PATH. A warning only: icpx's
# own error names it too, and an unusual layout may still work.
function(_ptkit_check_ocloc)
  get_filename_component(bin_dir "${PTKIT_ICPX}" DIRECTORY)
  find_program(ocloc NAMES ocloc PATHS "${bin_dir}" "${bin_dir}/compiler" ENV PATH NO_DEFAULT_PATH NO_CACHE)
  if(NOT ocloc)
    message(WARNING "ptkit: ocloc not found next to ${PTKIT_ICPX} or on PATH: ahead-of-time compilation "
                    "for Intel GPUs (spir64_gen) will fail. Install it (apt intel-ocloc, or Intel's "
                    "GPU driver packages) or `source /opt/intel/oneapi/setvars.sh`.")
  endif()
endfunction()

# ptkit_target_xpu_sources(<target> SOURCES <sycl .cpp>… DEVICES <aot device>… [JIT]
#                          [INCLUDE_DIRS <dir>…] [DEFINES <def>…])
# Compiles each SYCL source with icpx (-fsycl -fPIC -O3 -std=c++17), ahead of time for
# DEVICES (ocloc names: pvc, bmg …) and, with JIT (or "spir64" among DEVICES), also to
# SPIR-V for devices the list lacks; device-links the objects (-fsycl-link) into one
# host-linkable object; adds all of them to <target> and links libsycl.so from icpx's
# install. Call it in the directory that defines <target> (a custom command's outputs
# belong to its directory). The SYCL sources must be torch-free: no torch include
# directory is passed, only INCLUDE_DIRS, DEFINES and -DPTKIT_GPU_XPU (a custom command
# inherits none of the target's include directories, definitions or options).
function(ptkit_target_xpu_sources target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "JIT" "" "SOURCES;DEVICES;INCLUDE_DIRS;DEFINES")
  set(fn "ptkit_target_xpu_sources(${target})")
  _ptkit_check_arguments("${fn}" SOURCES)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}")
  endif()
  if(NOT PTKIT_ICPX OR NOT EXISTS "${PTKIT_ICPX}")
    message(FATAL_ERROR "${fn}: no icpx: call ptkit_find_xpu_compiler() first and check its FOUND_VAR")
  endif()
  # The recipe lists the JIT fallback as a device ("spir64"); it is a target, not an ocloc device.
  set(devices ${arg_DEVICES})
  set(jit ${arg_JIT})
  if("spir64" IN_LIST devices)
    list(REMOVE_ITEM devices spir64)
    set(jit TRUE)
  endif()
  if(NOT devices AND NOT jit)
    message(FATAL_ERROR "${fn}: nothing to build: give DEVICES (e.g. pvc bmg) and/or JIT")
  endif()
  if(devices)
    _ptkit_check_ocloc()
  endif()
  _ptkit_xpu_target_flags("${devices}" "${jit}" targets_flag backend_flags)

  set(includes "")
  foreach(dir IN LISTS arg_INCLUDE_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND includes "-I${dir}")
  endforeach()
  foreach(define IN LISTS arg_DEFINES)
    list(APPEND includes "-D${define}")
  endforeach()
  # -fp-model=precise: icpx defaults to fast floating point, which assumes no NaN or
  # Inf; torch's semantics (relu(NaN) = NaN, silu(-inf) = NaN) need them honoured.
  # -fvisibility=hidden: the launchers are for the op layer in the same library only.
  set(compile_flags -fsycl ${targets_flag} -fPIC -O3 -std=c++17 -fp-model=precise -fvisibility=hidden
                    -DPTKIT_GPU_XPU ${includes} "-ffile-prefix-map=${CMAKE_SOURCE_DIR}=.")

  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}_xpu")
  file(MAKE_DIRECTORY "${out_dir}")
  set(objects "")
  set(index 0)
  foreach(src IN LISTS arg_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(stem "${src}" NAME_WE)
    set(obj "${out_dir}/${index}_${stem}.o")  # the index keeps equal file names apart
    math(EXPR index "${index} + 1")
    add_custom_command(
      OUTPUT "${obj}"
      COMMAND "${PTKIT_ICPX}" ${compile_flags} -MD -MF "${obj}.d" -c "${src}" -o "${obj}"
      DEPENDS "${src}"
      DEPFILE "${obj}.d"
      COMMENT "ptkit: icpx -fsycl ${targets_flag} ${src}"
      VERBATIM COMMAND_EXPAND_LISTS)
    list(APPEND objects "${obj}")
  endforeach()

  # Device link: ocloc compiles the SPIR-V for each AOT device here, and the images are
  # wrapped (compressed) into a host object that registers them with the SYCL runtime
  # when the library is loaded.
  set(device_link "${out_dir}/device_link.o")
  add_custom_command(
    OUTPUT "${device_link}"
    COMMAND "${PTKIT_ICPX}" -fsycl -fsycl-link ${targets_flag} ${backend_flags} --offload-compress -fPIC
            ${objects} -o "${device_link}"
    DEPENDS ${objects}
    COMMENT "ptkit: icpx -fsycl-link (devices: ${devices}; JIT: ${jit}) -> ${device_link}"
    VERBATIM COMMAND_EXPAND_LISTS)

  set_source_files_properties(${objects} "${device_link}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${target} PRIVATE ${objects} "${device_link}")
  # The SYCL runtime torch's XPU build already loaded: DT_NEEDED libsycl.so.<major>, no
  # RPATH; icpx's major must match torch's (oneAPI 2025.x: libsycl.so.8).
  _ptkit_sycl_library(sycl_library)
  target_link_libraries(${target} PRIVATE "${sycl_library}")
  # Objects only (a library of SYCL sources alone) give CMake no language to link with.
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  list(JOIN backend_flags " " shown)
  message(STATUS "ptkit: ${target}: SYCL ${targets_flag} ${shown}; runtime ${sycl_library}")
endfunction()
