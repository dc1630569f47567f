# ptkit's CMake package: build PyTorch kernel libraries on the LibTorch stable ABI (or on
# torch's classic C++ API, for one torch minor: ABI torch), with a manifest the ptkit
# loader checks before it loads them. Reference, with the
# low-level calls each opinionated one equals: docs/cmake.md.
#
#   find_package(ptkit CONFIG REQUIRED)   # scikit-build-core: found through ptkit's
#                                         # cmake.root entry point; plain CMake:
#                                         # -Dptkit_DIR=$(ptkit --cmake-dir)
#   ptkit_add_kernel_library(myext_cpu BACKEND cpu NAMESPACE myext
#                            SOURCES ops.cpp ISA_SOURCES kernels.cpp ISA x86-64-v3
#                            OPS my_op DTYPES float32 INSTALL_DIR myext/_native)
#   ptkit_enable_backend(hip RESULT_VAR have_hip)      # at directory scope
#   if(have_hip)
#     ptkit_add_kernel_library(myext_hip BACKEND hip … TARGETS gfx942 gfx1100 …)
#   endif()
#   ptkit_add_metal_kernels(myext_metal SOURCES kernels.metal NAMESPACE myext …)
#
# The opinionated calls, one per kind of backend:
#   ptkit_add_kernel_library(BACKEND cpu|cuda|hip|xpu)   a C++ library (MODULE; SHARED on macOS)
#   ptkit_add_metal_kernels()                            a .metallib or the .metal sources
# and the small functions they are made of:
#   ptkit_enable_backend()  ptkit_read_recipe()
#   ptkit_target_stable_abi() or ptkit_target_torch_abi() (the two ABI modes)
#   ptkit_target_cpu_isa()
#   ptkit_resolve_targets() (cuda and hip: the override, the compiler, the resolution)
#   ptkit_target_cuda_archs()  ptkit_target_cuda_runtime()
#   ptkit_target_hip_sources()
#   ptkit_find_xpu_compiler()  ptkit_target_xpu_sources()
#   ptkit_add_metal_library()
#   ptkit_install_kernel_library() (install rules, manifest, GPU code audit)
#   ptkit_report_backend() (a row of the build report printed at the end of configure)
# A backend whose toolchain is missing is skipped with the reason; one whose requested
# targets cannot be built fails the build with the fix. The rules (recipes, backends,
# target overrides and resolution, toolkit discovery, ISA levels) are ptkit's Python
# modules', asked through python -m ptkit.<module> (ptkit-python.cmake): CMake keeps
# only what is CMake's (running compilers, enabling languages, targets and flags).
include_guard(GLOBAL)
# An empty keyword value (e.g. AUDIT "") stays an empty string in cmake_parse_arguments.
if(POLICY CMP0174)
  cmake_policy(SET CMP0174 NEW)
endif()

set(PTKIT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
# The oldest torch whose stable ABI the libraries target: they load into any torch >= it.
set(PTKIT_DEFAULT_TORCH_TARGET_VERSION "2.10" CACHE STRING "LibTorch stable ABI version to target")
# The ABI mode of a library when neither its call, -DPTKIT_ABI nor the recipe names one.
set(PTKIT_DEFAULT_ABI "stable")

# _ptkit_check_arguments(<fn> <required keyword>…): in a function that parsed its
# arguments with prefix arg: unknown arguments and missing required keywords are
# mistakes in the calling CMakeLists, reported at once with the function's name.
macro(_ptkit_check_arguments _ptkit_fn)
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${_ptkit_fn}: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(_ptkit_required ${ARGN})
    if(NOT arg_${_ptkit_required})
      message(FATAL_ERROR "${_ptkit_fn}: ${_ptkit_required} is required")
    endif()
  endforeach()
endmacro()

# The identity every kernel library's manifest records, with the same defaults in every
# public function: the stable-ABI target, the variant (default: the argument) and
# the package (default: the op namespace).
macro(_ptkit_identity_defaults _ptkit_default_variant)
  if(NOT arg_TORCH_TARGET_VERSION)
    set(arg_TORCH_TARGET_VERSION "${PTKIT_DEFAULT_TORCH_TARGET_VERSION}")
  endif()
  if(NOT arg_VARIANT)
    set(arg_VARIANT "${_ptkit_default_variant}")
  endif()
  if(NOT arg_PACKAGE)
    set(arg_PACKAGE "${arg_NAMESPACE}")
  endif()
endmacro()

include("${CMAKE_CURRENT_LIST_DIR}/ptkit-python.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-torch.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-cpu.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-targets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-cuda.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-hip.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-xpu.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-metal.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-manifest.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-report.cmake")

# ptkit_enable_backend(<backend> [REQUIRED] [RESULT_VAR <var>])  (PTKIT_BACKENDS)
# Finds the backend's toolchain (and enables CUDA for cuda). Not found: <var> is FALSE
# and the build report says why; with REQUIRED the build fails with that reason
# instead. A macro: enable_language must run at directory scope.
macro(ptkit_enable_backend _ptkit_backend)
  cmake_parse_arguments(_ptkit_eb "REQUIRED" "RESULT_VAR" "" ${ARGN})
  if(_ptkit_eb_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ptkit_enable_backend(${_ptkit_backend}): unknown arguments: "
                        "${_ptkit_eb_UNPARSED_ARGUMENTS}")
  endif()
  set(_ptkit_eb_found TRUE)
  set(_ptkit_eb_reason "")
  if(NOT "${_ptkit_backend}" IN_LIST PTKIT_BACKENDS)
    message(FATAL_ERROR "ptkit_enable_backend(${_ptkit_backend}): unknown backend "
                        "'${_ptkit_backend}' (expected one of ${PTKIT_BACKENDS_TEXT})")
  endif()
  if("${_ptkit_backend}" STREQUAL "cuda")
    _ptkit_find_nvcc(_ptkit_eb_found _ptkit_eb_reason)
    if(_ptkit_eb_found)
      _ptkit_enable_cuda_language()
    endif()
  elseif("${_ptkit_backend}" STREQUAL "hip")
    _ptkit_find_hip(_ptkit_eb_found _ptkit_eb_reason)
    # TheRock's CMake packages (hip, hipblas …) for the project's own find_package calls.
    if(_ptkit_eb_found AND PTKIT_HIP_CMAKE_PREFIX)
      list(APPEND CMAKE_PREFIX_PATH "${PTKIT_HIP_CMAKE_PREFIX}")
    endif()
  elseif("${_ptkit_backend}" STREQUAL "xpu")
    ptkit_find_xpu_compiler(FOUND_VAR _ptkit_eb_found REASON_VAR _ptkit_eb_reason)
  elseif("${_ptkit_backend}" STREQUAL "metal")
    _ptkit_find_metal(_ptkit_eb_found _ptkit_eb_reason)
  endif()
  if(NOT _ptkit_eb_found)
    if(_ptkit_eb_REQUIRED)
      ptkit_report_backend(${_ptkit_backend} failed "${_ptkit_eb_reason}")
      message(SEND_ERROR "ptkit_enable_backend(${_ptkit_backend}): the ${_ptkit_backend} backend "
                         "is required but was not found: ${_ptkit_eb_reason}")
    else()
      ptkit_report_backend(${_ptkit_backend} skipped "${_ptkit_eb_reason}")
      message(STATUS "ptkit: ${_ptkit_backend} skipped: ${_ptkit_eb_reason}")
    endif()
  endif()
  if(_ptkit_eb_RESULT_VAR)
    set(${_ptkit_eb_RESULT_VAR} ${_ptkit_eb_found})
  endif()
endmacro()

# ptkit_enable_cuda(): ptkit_enable_backend(cuda REQUIRED), kept for existing projects.
macro(ptkit_enable_cuda)
  ptkit_enable_backend(cuda REQUIRED)
endmacro()

# ptkit_add_kernel_library(<name> BACKEND <backend> NAMESPACE <ns> SOURCES <src>…
#     [ABI stable|torch]                                (default: PTKIT_ABI, the recipe's
#                                                       abi, else stable; ptkit.torch_abi)
#     [ISA_SOURCES <src>… [ISA <level>…]]               (cpu)
#     [TARGETS <target>… [OPTIONAL_TARGETS <target>…]]  (cuda: sm_…/compute_…, PTKIT_CUDA_ARCHS
#                                                       or TORCH_CUDA_ARCH_LIST override;
#                                                       hip: gfx…, PTKIT_HIP_TARGETS
#                                                       overrides; xpu: AOT devices + spir64)
#     [SYCL_SOURCES <src>…]                             (xpu: compiled by icpx)
#     [INCLUDE_DIRS <dir>…] [DEFINES <def>…] [COMPILE_OPTIONS <opt>…]
#     [LINK_LIBRARIES <lib>…] [REQUIRES_ISA <level>…]   (this library's own)
#     [OPS <op>…] DTYPES <dtype>…
#     [VARIANT <variant>] [PACKAGE <dist>] [TORCH_TARGET_VERSION <x.y>] INSTALL_DIR <dir>)
# For hip and cuda, SOURCES ending in .hip / .cu are device code. Call
# ptkit_enable_backend() for a GPU backend first (at directory scope). BACKEND metal is
# forwarded to ptkit_add_metal_kernels(), the Metal entry.
function(ptkit_add_kernel_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
    "BACKEND;NAMESPACE;VARIANT;PACKAGE;TORCH_TARGET_VERSION;INSTALL_DIR;ABI"
    "SOURCES;ISA_SOURCES;ISA;TARGETS;OPTIONAL_TARGETS;SYCL_SOURCES;INCLUDE_DIRS;OPS;DTYPES;DEFINES;COMPILE_OPTIONS;LINK_LIBRARIES;REQUIRES_ISA")
  set(fn "ptkit_add_kernel_library(${name})")
  _ptkit_check_arguments("${fn}" BACKEND)
  if(NOT arg_BACKEND IN_LIST PTKIT_BACKENDS)
    message(FATAL_ERROR "${fn}: BACKEND ${arg_BACKEND} is not one of ${PTKIT_BACKENDS_TEXT}")
  endif()
  if(arg_BACKEND STREQUAL "metal")
    foreach(cpp_only ISA_SOURCES ISA TARGETS OPTIONAL_TARGETS SYCL_SOURCES INCLUDE_DIRS DEFINES
                     COMPILE_OPTIONS LINK_LIBRARIES REQUIRES_ISA ABI)
      if(arg_${cpp_only})
        message(FATAL_ERROR "${fn}: ${cpp_only} does not apply to BACKEND metal")
      endif()
    endforeach()
    set(forward "")
    foreach(kw NAMESPACE VARIANT PACKAGE TORCH_TARGET_VERSION INSTALL_DIR)
      if(arg_${kw})
        list(APPEND forward ${kw} "${arg_${kw}}")
      endif()
    endforeach()
    ptkit_add_metal_kernels(${name} SOURCES ${arg_SOURCES} OPS ${arg_OPS} DTYPES ${arg_DTYPES} ${forward})
    return()
  endif()
  # No OPS: the op table comes from what the library registers (ptkit-write-manifest.cmake).
  _ptkit_check_arguments("${fn}" NAMESPACE SOURCES DTYPES INSTALL_DIR)
  set(torch_target_given "${arg_TORCH_TARGET_VERSION}")
  _ptkit_identity_defaults("${arg_BACKEND}")

  set(dropped "")
  set(audit "")
  set(error "")
  set(target_lists "")
  add_library(${name} ${PTKIT_LIBRARY_TYPE})
  target_include_directories(${name} PRIVATE ${arg_INCLUDE_DIRS})
  _ptkit_library_arguments()
  _ptkit_bind_torch()
  string(TOLOWER "${CMAKE_CXX_COMPILER_ID}" toolkit_name)
  set(toolkit_version "${CMAKE_CXX_COMPILER_VERSION}")
  if(error)
    # A source the ABI refuses: the report and the error say so; nothing else to do.
  elseif(arg_BACKEND STREQUAL "cpu")
    target_sources(${name} PRIVATE ${arg_SOURCES})
    _ptkit_cpu_library()
  elseif(arg_BACKEND STREQUAL "cuda")
    target_sources(${name} PRIVATE ${arg_SOURCES})
    _ptkit_cuda_library()
  elseif(arg_BACKEND STREQUAL "hip")
    _ptkit_hip_library()
  else()
    _ptkit_xpu_library()
  endif()
  if(error)
    # The row and the error both name the cause; configure goes on so that the report
    # is printed, and generation is refused.
    ptkit_report_backend(${arg_BACKEND} failed "${name}: ${error}")
    message(SEND_ERROR "${fn}: ${error}")
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    return()
  endif()
  if(abi STREQUAL "torch")
    string(APPEND report "; ABI torch: torch ${PTKIT_TORCH_MAJOR_MINOR} only")
  endif()
  if(arg_REQUIRES_ISA)
    list(JOIN arg_REQUIRES_ISA ", " requires_text)
    string(APPEND report "; requires CPU ISA ${requires_text}")
  endif()
  ptkit_report_backend(${arg_BACKEND} built "${name}: ${report}")

  ptkit_install_kernel_library(${name}
    BACKEND ${arg_BACKEND} VARIANT ${arg_VARIANT} PACKAGE ${arg_PACKAGE}
    NAMESPACE ${arg_NAMESPACE} TORCH_TARGET_VERSION ${torch_target}
    ABI ${abi} REQUIRES_ISA ${arg_REQUIRES_ISA}
    TOOLKIT_NAME ${toolkit_name} TOOLKIT_VERSION ${toolkit_version}
    ${target_lists} DROPPED ${dropped} AUDIT ${audit}
    OPS ${arg_OPS} DTYPES ${arg_DTYPES} INSTALL_DIR ${arg_INSTALL_DIR})
endfunction()

# --- the steps of ptkit_add_kernel_library that every backend shares: macros, so that
# they read its arg_* and set abi, torch_target and error in its scope ----------------

# The library's own arguments: DEFINES, COMPILE_OPTIONS and LINK_LIBRARIES as given (the
# ISA copies inherit them: ptkit_target_cpu_isa), and REQUIRES_ISA's compiler flags from
# ptkit.platforms (C++ sources; CUDA host code through -Xcompiler).
macro(_ptkit_library_arguments)
  target_compile_definitions(${name} PRIVATE ${arg_DEFINES})
  target_compile_options(${name} PRIVATE ${arg_COMPILE_OPTIONS})
  target_link_libraries(${name} PRIVATE ${arg_LINK_LIBRARIES})
  if(arg_REQUIRES_ISA)
    _ptkit_python_fields(requires_ requires_error -m ptkit.platforms requires-isa
                         "${CMAKE_SYSTEM_PROCESSOR}" "${PTKIT_COMPILER_ID}" ${arg_REQUIRES_ISA})
    if(requires_error)
      message(FATAL_ERROR "${fn}: ${requires_error}")
    endif()
    foreach(flag IN LISTS requires_FLAGS)
      target_compile_options(${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${flag}>"
                             "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${flag}>")
    endforeach()
    message(STATUS "ptkit: ${name}: requires CPU ISA ${arg_REQUIRES_ISA} (${requires_FLAGS}); "
                   "the loader skips it on a CPU without")
  endif()
endmacro()

# The ABI mode (ABI, else -DPTKIT_ABI, else the recipe's abi, else stable; ptkit.torch_abi
# checks the value), the torch settings of that mode, and the sources' includes against
# it: a source that includes what the mode refuses sets error (the reason and the fix).
# torch_target: the manifest's torch.target_version (torch mode: the build's minor).
macro(_ptkit_bind_torch)
  if(arg_ABI)
    set(abi "${arg_ABI}")
    set(abi_from "ABI")
  elseif(PTKIT_ABI)
    set(abi "${PTKIT_ABI}")
    set(abi_from "PTKIT_ABI")
  elseif(PTKIT_RECIPE_ABI)
    set(abi "${PTKIT_RECIPE_ABI}")
    set(abi_from "the recipe's abi")
  else()
    set(abi "${PTKIT_DEFAULT_ABI}")
    set(abi_from "ABI")
  endif()
  _ptkit_python_fields(abi_ abi_error -m ptkit.torch_abi check "${abi}" "--where=${abi_from}")
  if(abi_error)
    message(FATAL_ERROR "${fn}: ${abi_error}")
  endif()
  if(abi STREQUAL "torch")
    if(torch_target_given)
      message(STATUS "ptkit: ${name}: ABI torch: built for torch ${PTKIT_TORCH_MAJOR_MINOR} "
                     "(TORCH_TARGET_VERSION ${torch_target_given} applies to ABI stable)")
    endif()
    ptkit_target_torch_abi(${name} BACKEND ${arg_BACKEND})
    set(torch_target "${PTKIT_TORCH_MAJOR_MINOR}")
  else()
    ptkit_target_stable_abi(${name} TORCH_TARGET_VERSION ${arg_TORCH_TARGET_VERSION})
    set(torch_target "${arg_TORCH_TARGET_VERSION}")
  endif()
  set(scanned "")
  foreach(source IN LISTS arg_SOURCES arg_ISA_SOURCES arg_SYCL_SOURCES)
    get_filename_component(source "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND scanned "${source}")
  endforeach()
  _ptkit_python_fields(includes_ includes_error -m ptkit.torch_abi includes ${abi} ${scanned})
  if(includes_error)
    message(FATAL_ERROR "${fn}: ${includes_error}")
  endif()
  if(includes_PROBLEMS)
    list(JOIN includes_PROBLEMS " " error)
  endif()
endmacro()

# ptkit_add_metal_kernels(<name> SOURCES <file.metal>… NAMESPACE <ns> OPS <op>…
#     DTYPES <dtype>… INSTALL_DIR <dir> [VARIANT <variant>] [PACKAGE <dist>]
#     [TORCH_TARGET_VERSION <x.y>])
# Metal kernels for Apple GPUs: with Xcode's `xcrun metal` one <name>.metallib,
# otherwise the sources as one <name>.metal (torch.mps.compile_shader compiles it at
# first use); installed with its manifest. There is no C++ library: ptkit's runtime
# registers the kernels as the MPS implementation. Runs ptkit_enable_backend(metal)
# itself when the project has not (Metal always finds a way).
function(ptkit_add_metal_kernels name)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
    "NAMESPACE;VARIANT;PACKAGE;TORCH_TARGET_VERSION;INSTALL_DIR" "SOURCES;OPS;DTYPES")
  set(fn "ptkit_add_metal_kernels(${name})")
  _ptkit_check_arguments("${fn}" SOURCES NAMESPACE OPS DTYPES INSTALL_DIR)
  foreach(source IN LISTS arg_SOURCES)
    if(NOT source MATCHES "\\.metal$")
      message(FATAL_ERROR "${fn}: SOURCES are .metal files; got ${source}")
    endif()
  endforeach()
  _ptkit_identity_defaults(metal)
  if(NOT PTKIT_METAL_MODE)
    ptkit_enable_backend(metal)
  endif()
  ptkit_add_metal_library(${name} SOURCES ${arg_SOURCES} FILE_VAR file)
  if(PTKIT_METAL_MODE STREQUAL "metallib")
    set(report "metallib (xcrun metal ${PTKIT_METAL_VERSION})")
  else()
    set(report "sources shipped, compiled at first use by torch.mps.compile_shader (no xcrun metal here)")
  endif()
  ptkit_report_backend(metal built "${name}: ${report}")
  ptkit_install_kernel_library(${name} FILE "${file}"
    BACKEND metal VARIANT ${arg_VARIANT} PACKAGE ${arg_PACKAGE} NAMESPACE ${arg_NAMESPACE}
    TORCH_TARGET_VERSION ${arg_TORCH_TARGET_VERSION}
    TOOLKIT_NAME metal TOOLKIT_VERSION ${PTKIT_METAL_VERSION} METAL ${PTKIT_METAL_MODE}
    OPS ${arg_OPS} DTYPES ${arg_DTYPES} INSTALL_DIR ${arg_INSTALL_DIR})
endfunction()

# The backend steps of ptkit_add_kernel_library: macros, so that they read its arg_*
# and set target_lists (the manifest's targets, as ptkit_install_kernel_library
# keywords), report, toolkit_*, dropped, audit and error in its scope.

macro(_ptkit_cpu_library)
  set(isa_built "")
  if(arg_ISA_SOURCES)
    if(NOT arg_ISA)
      set(arg_ISA default)
    endif()
    ptkit_target_cpu_isa(${name} SOURCES ${arg_ISA_SOURCES} ISA ${arg_ISA}
                         INCLUDE_DIRS ${arg_INCLUDE_DIRS} BUILT_VAR isa_built)
  elseif(arg_ISA)
    message(FATAL_ERROR "${fn}: ISA needs ISA_SOURCES (the files compiled once per level)")
  endif()
  set(target_lists ISA ${isa_built})
  list(JOIN isa_built ", " isa_text)
  if(NOT isa_text)
    set(isa_text "none (compiled once, no ISA_SOURCES)")
  endif()
  set(report "isa ${isa_text} (${toolkit_name} ${toolkit_version})")
endmacro()

macro(_ptkit_cuda_library)
  if(NOT PTKIT_NVCC OR NOT CMAKE_CUDA_COMPILER_LOADED)
    message(FATAL_ERROR "${fn}: BACKEND cuda needs ptkit_enable_backend(cuda) first (at directory "
                        "scope, before the call)")
  endif()
  ptkit_resolve_targets(cuda TARGETS ${arg_TARGETS} OPTIONAL_TARGETS ${arg_OPTIONAL_TARGETS}
                        RESULT_PREFIX resolved)
  set(error "${resolved_ERROR}")
  if(NOT error)
    ptkit_target_cuda_archs(${name} SASS ${resolved_SASS} PTX ${resolved_PTX})
    ptkit_target_cuda_runtime(${name})
    set(target_lists ${resolved_LISTS})
    set(dropped ${resolved_DROPPED})
    set(toolkit_name "cuda")
    set(toolkit_version "${PTKIT_CUDA_FULL_VERSION}")
    set(audit "cuda")
    list(JOIN resolved_SASS ", " sass_text)
    list(JOIN resolved_PTX ", " ptx_text)
    if(NOT ptx_text)
      set(ptx_text "none")
    endif()
    set(report "SASS ${sass_text}; PTX ${ptx_text} (CUDA ${PTKIT_CUDA_FULL_VERSION}, ${PTKIT_CUDA_SOURCE})")
    _ptkit_report_dropped()
  endif()
endmacro()

macro(_ptkit_hip_library)
  if(NOT PTKIT_HIPCC)
    message(FATAL_ERROR "${fn}: BACKEND hip needs ptkit_enable_backend(hip) first")
  endif()
  set(hip_sources ${arg_SOURCES})
  list(FILTER hip_sources INCLUDE REGEX "\\.hip$")
  set(host_sources ${arg_SOURCES})
  list(FILTER host_sources EXCLUDE REGEX "\\.hip$")
  target_sources(${name} PRIVATE ${host_sources})
  ptkit_resolve_targets(hip TARGETS ${arg_TARGETS} OPTIONAL_TARGETS ${arg_OPTIONAL_TARGETS}
                        RESULT_PREFIX resolved)
  set(error "${resolved_ERROR}")
  if(NOT error)
    ptkit_target_hip_sources(${name} SOURCES ${hip_sources} TARGETS ${resolved_BUILT}
                             INCLUDE_DIRS ${arg_INCLUDE_DIRS} DEFINES ${arg_DEFINES})
    set(target_lists ${resolved_LISTS})
    set(dropped ${resolved_DROPPED})
    set(toolkit_name "hip")
    set(toolkit_version "${PTKIT_HIP_VERSION}")
    set(audit "hip")
    list(JOIN resolved_BUILT ", " gfx_text)
    set(report "${gfx_text} (HIP ${PTKIT_HIP_VERSION}, ${PTKIT_HIP_SOURCE} ${PTKIT_HIPCC})")
    _ptkit_report_dropped()
  endif()
endmacro()

# The build report's note of dropped optional targets (they are in the manifest too).
macro(_ptkit_report_dropped)
  if(dropped)
    list(JOIN dropped ", " dropped_text)
    string(APPEND report ", dropped ${dropped_text}")
  endif()
endmacro()

macro(_ptkit_xpu_library)
  if(NOT PTKIT_ICPX)
    message(FATAL_ERROR "${fn}: BACKEND xpu needs ptkit_enable_backend(xpu) first")
  endif()
  if(NOT arg_TARGETS)
    message(FATAL_ERROR "${fn}: BACKEND xpu needs TARGETS (AOT devices such as pvc bmg, and spir64 for JIT)")
  endif()
  if(NOT arg_SYCL_SOURCES)
    message(FATAL_ERROR "${fn}: BACKEND xpu needs SYCL_SOURCES (the kernels icpx compiles)")
  endif()
  target_sources(${name} PRIVATE ${arg_SOURCES})
  target_compile_definitions(${name} PRIVATE PTKIT_GPU_XPU)
  ptkit_target_xpu_sources(${name} SOURCES ${arg_SYCL_SOURCES} DEVICES ${arg_TARGETS}
                           INCLUDE_DIRS ${arg_INCLUDE_DIRS} DEFINES ${arg_DEFINES})
  set(target_lists XPU ${arg_TARGETS})
  set(toolkit_name "oneapi")
  set(toolkit_version "${PTKIT_ICPX_VERSION}")
  list(JOIN arg_TARGETS ", " xpu_text)
  set(report "${xpu_text} (icpx ${PTKIT_ICPX_VERSION})")
endmacro()
