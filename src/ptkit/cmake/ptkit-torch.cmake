# Locate torch's headers and libraries (without importing torch) and apply the
# LibTorch stable-ABI compile and link settings.
include_guard(GLOBAL)

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c [=[
import importlib.util, pathlib, re
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    raise SystemExit("torch is not installed in this Python: pip install 'torch>=2.10'")
root = pathlib.Path(list(spec.submodule_search_locations)[0])
text = (root / "version.py").read_text()
def field(name):
    m = re.search(rf"^{name}\b[^=]*= *'?([^'\n]*)'?", text, re.M)
    return m.group(1) if m and m.group(1) != "None" else ""
print(f"ROOT={root.as_posix()}")
print(f"VERSION={field('__version__')}")
print(f"CUDA={field('cuda')}")
print(f"HIP={field('hip')}")
]=]
  OUTPUT_VARIABLE _ptkit_torch_out ERROR_VARIABLE _ptkit_torch_err RESULT_VARIABLE _ptkit_torch_rc)
if(NOT _ptkit_torch_rc EQUAL 0)
  message(FATAL_ERROR "ptkit: cannot locate torch with ${Python_EXECUTABLE}: ${_ptkit_torch_err}")
endif()
string(REPLACE "\n" ";" _ptkit_torch_lines "${_ptkit_torch_out}")
foreach(_line IN LISTS _ptkit_torch_lines)
  if(_line MATCHES "^([A-Z]+)=(.*)$")
    set(PTKIT_TORCH_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()
set(PTKIT_TORCH_INCLUDE_DIR "${PTKIT_TORCH_ROOT}/include")
if(NOT EXISTS "${PTKIT_TORCH_INCLUDE_DIR}/torch/csrc/stable/library.h")
  message(FATAL_ERROR "ptkit: torch ${PTKIT_TORCH_VERSION} at ${PTKIT_TORCH_ROOT} has no stable-ABI "
                      "headers (torch/csrc/stable/library.h); install torch >= 2.10")
endif()
find_library(PTKIT_TORCH_CPU_LIBRARY NAMES torch_cpu PATHS "${PTKIT_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
message(STATUS "ptkit: torch ${PTKIT_TORCH_VERSION} (headers and libtorch_cpu) at ${PTKIT_TORCH_ROOT}")

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
  target_include_directories(${target} SYSTEM PRIVATE "${PTKIT_TORCH_INCLUDE_DIR}")
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON PREFIX "lib")
  target_link_libraries(${target} PRIVATE "${PTKIT_TORCH_CPU_LIBRARY}")
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # Fail at link time on a missing symbol rather than at dlopen on a user's machine.
    target_link_options(${target} PRIVATE "LINKER:--no-undefined" "LINKER:--as-needed")
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
