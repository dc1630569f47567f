# The manifest: a JSON file installed next to each kernel library, written by the
# build and read by ptkit's loader *before* it loads the library
# (schema: src/ptkit/loading/manifest.schema.json).
include_guard(GLOBAL)

set(PTKIT_MANIFEST_SCHEMA_VERSION 1)

function(_ptkit_json_string_array out_var)
  set(json "[]")
  set(i 0)
  foreach(item IN LISTS ARGN)
    string(JSON json SET "${json}" ${i} "\"${item}\"")
    math(EXPR i "${i} + 1")
  endforeach()
  set(${out_var} "${json}" PARENT_SCOPE)
endfunction()

# _ptkit_manifest_torch_binding(<manifest_var>): the manifest's torch object, in the
# caller that parsed ptkit_install_kernel_library's arguments: the target version, the
# torch of the build, the ABI mode (ptkit.torch_abi; ABI torch: the target is the build's
# torch minor and the C++ ABI is recorded).
macro(_ptkit_manifest_torch_binding _ptkit_m)
  if(NOT arg_ABI)
    set(arg_ABI "${PTKIT_DEFAULT_ABI}")
  endif()
  set(_ptkit_torch "{}")
  if(arg_ABI STREQUAL "torch")
    set(arg_TORCH_TARGET_VERSION "${PTKIT_TORCH_MAJOR_MINOR}")
  endif()
  string(JSON _ptkit_torch SET "${_ptkit_torch}" target_version "\"${arg_TORCH_TARGET_VERSION}\"")
  string(JSON _ptkit_torch SET "${_ptkit_torch}" built_with "\"${PTKIT_TORCH_VERSION}\"")
  string(JSON _ptkit_torch SET "${_ptkit_torch}" abi "\"${arg_ABI}\"")
  if(arg_ABI STREQUAL "torch" AND NOT PTKIT_TORCH_CXX11_ABI STREQUAL "")
    if(PTKIT_TORCH_CXX11_ABI)
      string(JSON _ptkit_torch SET "${_ptkit_torch}" cxx11_abi true)
    else()
      string(JSON _ptkit_torch SET "${_ptkit_torch}" cxx11_abi false)
    endif()
  endif()
  string(JSON ${_ptkit_m} SET "${${_ptkit_m}}" torch "${_ptkit_torch}")
endmacro()

# ptkit_install_kernel_library(<target> BACKEND <backend> NAMESPACE <ns>
#     [OPS <op>…] DTYPES <dtype>… INSTALL_DIR <dir>
#     [ISA <level>…] [SASS <sm_…>…] [PTX <compute_…>…] [GFX <gfx…>…] [XPU <device>…]
#     [METAL <metallib|source>]                 (the manifest's "targets", one key each)
#     [DROPPED <target>…] [VARIANT <v>] [PACKAGE <dist>] [TORCH_TARGET_VERSION <x.y>]
#     [ABI stable|torch] [REQUIRES_ISA <level>…]
#     [TOOLKIT_NAME <n> TOOLKIT_VERSION <v>] [AUDIT cuda|hip] [FILE <path>])
# Installs the library (the target's file, or FILE for a target that produces a plain
# file: a .metallib or .metal sources) into INSTALL_DIR and writes
# <target>.manifest.json beside it; the sha256 is taken from the installed file, after
# CMake's install-time RPATH edit. AUDIT compares the GPU code inside with the manifest
# (ptkit.release.fatbin / ptkit.release.offload) and fails the install on a mismatch.
# Defaults: VARIANT = BACKEND, PACKAGE = NAMESPACE, TORCH_TARGET_VERSION =
# PTKIT_DEFAULT_TORCH_TARGET_VERSION (ABI torch: the build's torch minor), ABI = stable,
# TOOLKIT_* = the C++ compiler's id and version.
function(ptkit_install_kernel_library target)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
    "BACKEND;VARIANT;PACKAGE;NAMESPACE;TORCH_TARGET_VERSION;INSTALL_DIR;TOOLKIT_NAME;TOOLKIT_VERSION;TARGETS_JSON;AUDIT;FILE;ABI"
    "OPS;DTYPES;DROPPED;ISA;SASS;PTX;GFX;XPU;METAL;REQUIRES_ISA")
  set(fn "ptkit_install_kernel_library(${target})")
  # OPS may be left out: the install step takes the op table from what the library
  # registers (ptkit.release.registrations).
  _ptkit_check_arguments("${fn}" BACKEND NAMESPACE DTYPES INSTALL_DIR)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}: no target named ${target}: create it first (add_library(${target} "
                        "MODULE …), or ptkit_add_metal_library for Metal)")
  endif()
  if(NOT arg_BACKEND IN_LIST PTKIT_BACKENDS)
    message(FATAL_ERROR "${fn}: BACKEND ${arg_BACKEND} is not one of ${PTKIT_BACKENDS_TEXT}")
  endif()
  if(arg_AUDIT AND NOT arg_AUDIT MATCHES "^(cuda|hip)$")
    message(FATAL_ERROR "${fn}: AUDIT ${arg_AUDIT} is not one of cuda, hip")
  endif()
  if(arg_ABI)
    _ptkit_python_tool(abi_ "${fn}" -m ptkit.torch_abi check "${arg_ABI}")
  endif()
  set(dtype_re "^(float32|float16|bfloat16)$")
  foreach(dtype IN LISTS arg_DTYPES)
    if(NOT dtype MATCHES "${dtype_re}")
      message(FATAL_ERROR "${fn}: DTYPES ${dtype} is not one of float32, float16, bfloat16")
    endif()
  endforeach()
  _ptkit_identity_defaults("${arg_BACKEND}")
  if(NOT arg_TOOLKIT_NAME)
    string(TOLOWER "${CMAKE_CXX_COMPILER_ID}" arg_TOOLKIT_NAME)
    set(arg_TOOLKIT_VERSION "${CMAKE_CXX_COMPILER_VERSION}")
  endif()
  if(NOT arg_TARGETS_JSON)
    set(arg_TARGETS_JSON "{}")
    foreach(kind ISA SASS PTX GFX XPU METAL)
      if(DEFINED arg_${kind} OR kind IN_LIST arg_KEYWORDS_MISSING_VALUES)
        string(TOLOWER "${kind}" key)
        _ptkit_json_string_array(list_json ${arg_${kind}})
        string(JSON arg_TARGETS_JSON SET "${arg_TARGETS_JSON}" "${key}" "${list_json}")
      endif()
    endforeach()
  endif()

  if(arg_FILE)
    get_filename_component(library_name "${arg_FILE}" NAME)
  else()
    set(library_name "$<TARGET_FILE_NAME:${target}>")
  endif()
  set(m "{}")
  string(JSON m SET "${m}" schema_version "${PTKIT_MANIFEST_SCHEMA_VERSION}")
  string(JSON m SET "${m}" package "\"${arg_PACKAGE}\"")
  string(JSON m SET "${m}" namespace "\"${arg_NAMESPACE}\"")
  string(JSON m SET "${m}" library "\"${library_name}\"")
  string(JSON m SET "${m}" backend "\"${arg_BACKEND}\"")
  string(JSON m SET "${m}" variant "\"${arg_VARIANT}\"")
  string(JSON m SET "${m}" toolkit
    "{\"name\": \"${arg_TOOLKIT_NAME}\", \"version\": \"${arg_TOOLKIT_VERSION}\"}")
  string(JSON m SET "${m}" targets "${arg_TARGETS_JSON}")
  _ptkit_json_string_array(dropped ${arg_DROPPED})
  string(JSON m SET "${m}" dropped_targets "${dropped}")
  _ptkit_manifest_torch_binding(m)
  string(TOLOWER "${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}" platform)
  string(JSON m SET "${m}" platform "\"${platform}\"")
  _ptkit_json_string_array(dtypes ${arg_DTYPES})
  set(ops "{}")
  foreach(op IN LISTS arg_OPS)
    string(JSON ops SET "${ops}" "${op}" "${dtypes}")
  endforeach()
  string(JSON m SET "${m}" ops "${ops}")
  _ptkit_json_string_array(requires_isa ${arg_REQUIRES_ISA})
  string(JSON m SET "${m}" requires_isa "${requires_isa}")
  string(JSON m SET "${m}" sha256 "\"\"")

  set(template "${CMAKE_CURRENT_BINARY_DIR}/${target}.manifest.in.json")
  file(GENERATE OUTPUT "${template}" CONTENT "${m}\n")
  if(arg_FILE)
    install(FILES "${arg_FILE}" DESTINATION "${arg_INSTALL_DIR}")
  else()
    install(TARGETS ${target} LIBRARY DESTINATION "${arg_INSTALL_DIR}" RUNTIME DESTINATION "${arg_INSTALL_DIR}")
  endif()
  install(CODE "
    set(_ptkit_library \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${arg_INSTALL_DIR}/${library_name}\")
    set(_ptkit_manifest_template \"${template}\")
    set(_ptkit_manifest \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${arg_INSTALL_DIR}/${target}.manifest.json\")
    set(_ptkit_audit \"${arg_AUDIT}\")
    set(_ptkit_dtypes \"${arg_DTYPES}\")
    set(_ptkit_python \"${Python_EXECUTABLE}\")
    set(_ptkit_python_path \"${PTKIT_PYTHON_PATH}\")
    set(_ptkit_cuda_root \"${PTKIT_CUDA_TOOLKIT_ROOT}\")
    include(\"${PTKIT_CMAKE_DIR}/ptkit-write-manifest.cmake\")
  ")
endfunction()
