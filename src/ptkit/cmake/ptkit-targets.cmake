# The one resolver of a GPU library's targets (CUDA and HIP alike). The rules are
# ptkit.backends': how an override variable is read, which targets a compiler's list
# covers, what is dropped and what fails, and the error's wording; CMake gathers what
# only it can (what the compiler builds) and asks.
include_guard(GLOBAL)

# ptkit_resolve_targets(<backend> [TARGETS <t>…] [OPTIONAL_TARGETS <t>…] RESULT_PREFIX <p>)
#  1. the request (python -m ptkit.backends request): TARGETS and OPTIONAL_TARGETS, unless
#     the backend's override variable is set (PTKIT_CUDA_ARCHS, PTKIT_HIP_TARGETS; for
#     CUDA also TORCH_CUDA_ARCH_LIST, below PTKIT_CUDA_ARCHS): then its targets, none
#     optional, and a status line saying which variable replaced them; an override
#     Python cannot read is an error;
#  2. what the compiler builds: _ptkit_<backend>_buildable_targets (cuda: nvcc's lists;
#     hip: a probe compile per target);
#  3. the resolution (python -m ptkit.backends resolve): an optional target the compiler
#     lacks is dropped, a required one is an error naming the toolkit that has it and the
#     fix (the recipe's [toolkit] packages first, when ptkit_read_recipe read a recipe of
#     this backend, then the override variable).
# Sets in the caller <p>_BUILT, <p>_DROPPED, <p>_SOURCE (recipe, or the override variable),
# <p>_LISTS (the manifest's target lists as ptkit_install_kernel_library keywords:
# "SASS;sm_90;PTX;compute_90", "GFX;gfx942") and <p>_<LIST> for each list (SASS, PTX; GFX);
# or <p>_ERROR, the reason with the fix: the caller fails the build with it, after its
# report row. Needs ptkit_enable_backend(<backend>) first.
function(ptkit_resolve_targets backend)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "RESULT_PREFIX" "TARGETS;OPTIONAL_TARGETS")
  set(fn "ptkit_resolve_targets(${backend})")
  _ptkit_check_arguments("${fn}" RESULT_PREFIX)
  if(NOT COMMAND _ptkit_${backend}_buildable_targets)
    message(FATAL_ERROR "${fn}: the ${backend} backend has no target resolution; ptkit resolves "
                        "the targets of the backends whose compiler lists them (cuda, hip)")
  endif()
  set(p "${arg_RESULT_PREFIX}")
  foreach(key BUILT DROPPED SOURCE LISTS ERROR)
    set(${p}_${key} "" PARENT_SCOPE)
  endforeach()

  string(REPLACE ";" "\\;" targets "${arg_TARGETS}")
  string(REPLACE ";" "\\;" optional "${arg_OPTIONAL_TARGETS}")
  _ptkit_python_fields(request_ error -m ptkit.backends request ${backend}
                       "--targets=${targets}" "--optional=${optional}")
  if(error)
    set(${p}_ERROR "${error}" PARENT_SCOPE)
    return()
  endif()
  if(NOT request_SOURCE STREQUAL "recipe")
    message(STATUS "ptkit: ${request_SOURCE}=$ENV{${request_SOURCE}} -> ${request_TARGETS}")
  endif()
  if(request_NOTE)
    # Which variable replaced the recipe's targets, or won over another (ptkit.backends).
    message(STATUS "ptkit: ${request_NOTE}")
  endif()
  if(NOT request_TARGETS AND NOT request_OPTIONAL)
    set(${p}_ERROR "nothing to build: no TARGETS (the recipe's target list) and no ${request_OVERRIDE}"
        PARENT_SCOPE)
    return()
  endif()

  cmake_language(CALL _ptkit_${backend}_buildable_targets "${request_TARGETS};${request_OPTIONAL}"
                 supported compiler)
  _ptkit_toolkit_install_hint(${backend} hint)
  if(request_SOURCE STREQUAL "recipe" AND request_OVERRIDE)
    # A local build may also ask for less than the recipe does.
    set(override "override the targets with ${request_OVERRIDE} (ones this compiler builds)")
    if(hint)
      set(hint "${hint}, or ${override}")
    else()
      set(hint "${override}")
    endif()
  endif()
  string(REPLACE ";" "\\;" targets "${request_TARGETS}")
  string(REPLACE ";" "\\;" optional "${request_OPTIONAL}")
  string(REPLACE ";" "\\;" supported "${supported}")
  _ptkit_python_fields(res_ error -m ptkit.backends resolve ${backend}
                       "--targets=${targets}" "--optional=${optional}"
                       "--source=${request_SOURCE}" "--supported=${supported}"
                       "--compiler=${compiler}" "--toolkit-fix=${hint}")
  if(NOT error)
    set(error "${res_ERROR}")
  endif()
  if(error)
    set(${p}_ERROR "${error}" PARENT_SCOPE)
    return()
  endif()
  if(res_DROPPED)
    list(JOIN res_DROPPED ", " dropped_text)
    message(WARNING "${fn}: optional target(s) ${dropped_text} dropped: ${compiler} does not "
                    "build them (recorded in the manifest)")
  endif()
  set(lists "")
  foreach(key IN LISTS res_MANIFEST_KEYS)
    list(APPEND lists ${key} ${res_${key}})
    set(${p}_${key} "${res_${key}}" PARENT_SCOPE)
  endforeach()
  set(${p}_BUILT "${res_BUILT}" PARENT_SCOPE)
  set(${p}_DROPPED "${res_DROPPED}" PARENT_SCOPE)
  set(${p}_SOURCE "${request_SOURCE}" PARENT_SCOPE)
  set(${p}_LISTS "${lists}" PARENT_SCOPE)
endfunction()
