# ptkit's CMake package: build PyTorch kernel libraries on the LibTorch stable ABI,
# with a manifest the ptkit loader checks before it loads them.
#
#   find_package(ptkit CONFIG REQUIRED)
#   ptkit_read_recipe(cpu RECIPES_DIR ${CMAKE_CURRENT_SOURCE_DIR}/recipes)
#   ptkit_add_kernel_library(myext_cpu BACKEND cpu NAMESPACE myext
#                            SOURCES ops.cpp ISA_SOURCES kernels.cpp ISA ${PTKIT_RECIPE_ISA}
#                            OPS my_op DTYPES float32 INSTALL_DIR myext/_native)
#
# ptkit_add_kernel_library is the opinionated call; it equals
#   add_library(MODULE) + ptkit_target_stable_abi() + ptkit_target_cpu_isa()
#   + ptkit_install_kernel_library() (install rules and manifest); for BACKEND cuda,
#   ptkit_resolve_cuda_targets() + ptkit_target_cuda_archs() instead of the ISA step
#   (call ptkit_enable_cuda() first, at directory scope).
include_guard(GLOBAL)
# An empty keyword value (e.g. AUDIT "") stays an empty string in cmake_parse_arguments.
if(POLICY CMP0174)
  cmake_policy(SET CMP0174 NEW)
endif()

set(PTKIT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
# The oldest torch whose stable ABI the libraries target: they load into any torch >= it.
set(PTKIT_DEFAULT_TORCH_TARGET_VERSION "2.10" CACHE STRING "LibTorch stable ABI version to target")

include("${CMAKE_CURRENT_LIST_DIR}/ptkit-python.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-torch.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-cpu.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-cuda.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-manifest.cmake")

# ptkit_add_kernel_library(<name> BACKEND cpu|cuda NAMESPACE <ns> SOURCES <src>…
#     [ISA_SOURCES <src>… ISA <level>…]            (cpu)
#     [TARGETS <sm_…|compute_…>… OPTIONAL_TARGETS …] (cuda; PTKIT_CUDA_ARCHS overrides TARGETS)
#     [INCLUDE_DIRS <dir>…] OPS <op>… DTYPES <dtype>…
#     [VARIANT <variant>] [PACKAGE <dist>] [TORCH_TARGET_VERSION <x.y>] INSTALL_DIR <dir>)
function(ptkit_add_kernel_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
    "BACKEND;NAMESPACE;VARIANT;PACKAGE;TORCH_TARGET_VERSION;INSTALL_DIR"
    "SOURCES;ISA_SOURCES;ISA;TARGETS;OPTIONAL_TARGETS;INCLUDE_DIRS;OPS;DTYPES")
  set(fn "ptkit_add_kernel_library(${name})")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${fn}: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required BACKEND NAMESPACE SOURCES OPS DTYPES INSTALL_DIR)
    if(NOT arg_${required})
      message(FATAL_ERROR "${fn}: ${required} is required")
    endif()
  endforeach()
  if(NOT arg_BACKEND MATCHES "^(cpu|cuda)$")
    message(FATAL_ERROR "${fn}: BACKEND ${arg_BACKEND} is not supported yet; supported: cpu, cuda")
  endif()
  if(NOT arg_TORCH_TARGET_VERSION)
    set(arg_TORCH_TARGET_VERSION "${PTKIT_DEFAULT_TORCH_TARGET_VERSION}")
  endif()
  if(NOT arg_VARIANT)
    set(arg_VARIANT "${arg_BACKEND}")
  endif()
  if(NOT arg_PACKAGE)
    set(arg_PACKAGE "${arg_NAMESPACE}")
  endif()

  add_library(${name} MODULE ${arg_SOURCES})
  target_include_directories(${name} PRIVATE ${arg_INCLUDE_DIRS})
  ptkit_target_stable_abi(${name} TORCH_TARGET_VERSION ${arg_TORCH_TARGET_VERSION})
  string(TOLOWER "${CMAKE_CXX_COMPILER_ID}" toolkit_name)
  set(toolkit_version "${CMAKE_CXX_COMPILER_VERSION}")
  set(dropped "")
  set(audit "")

  if(arg_BACKEND STREQUAL "cpu")
    set(isa_built "")
    if(arg_ISA_SOURCES)
      if(NOT arg_ISA)
        set(arg_ISA default)
      endif()
      ptkit_target_cpu_isa(${name} SOURCES ${arg_ISA_SOURCES} ISA ${arg_ISA}
                           INCLUDE_DIRS ${arg_INCLUDE_DIRS} BUILT_VAR isa_built)
    endif()
    _ptkit_json_string_array(isa_json ${isa_built})
    set(targets_json "{\"isa\": ${isa_json}}")
  else()
    if(NOT PTKIT_NVCC OR NOT CMAKE_CUDA_COMPILER_LOADED)
      message(FATAL_ERROR "${fn}: BACKEND cuda needs ptkit_enable_cuda() first (at directory scope, "
                          "before the call)")
    endif()
    set(requested ${arg_TARGETS})
    if(DEFINED ENV{PTKIT_CUDA_ARCHS} AND NOT "$ENV{PTKIT_CUDA_ARCHS}" STREQUAL "")
      ptkit_parse_cuda_arch_list("$ENV{PTKIT_CUDA_ARCHS}" requested)
      set(arg_OPTIONAL_TARGETS "")
      message(STATUS "ptkit: ${name}: PTKIT_CUDA_ARCHS=$ENV{PTKIT_CUDA_ARCHS} -> ${requested}")
    endif()
    if(NOT requested AND NOT arg_OPTIONAL_TARGETS)
      message(FATAL_ERROR "${fn}: BACKEND cuda needs TARGETS (e.g. sm_90 compute_120) or PTKIT_CUDA_ARCHS")
    endif()
    ptkit_resolve_cuda_targets(REQUESTED ${requested} OPTIONAL ${arg_OPTIONAL_TARGETS}
                               SASS_VAR sass PTX_VAR ptx DROPPED_VAR dropped)
    ptkit_target_cuda_archs(${name} SASS ${sass} PTX ${ptx})
    target_compile_definitions(${name} PRIVATE USE_CUDA)
    # cuda_runtime_api.h for the host-compiled op layer.
    target_include_directories(${name} SYSTEM PRIVATE ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
    # The shared runtime torch already loaded (DT_NEEDED libcudart.so.<major>, no RPATH): the
    # wheel carries no second copy. pip's runtime ships only the versioned file name.
    # pip's toolkit keeps it in lib/, a system toolkit in lib64/ or targets/<arch>/lib.
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
    target_link_libraries(${name} PRIVATE "${PTKIT_TORCH_CUDA_LIBRARY}" "${cudart}")
    set_target_properties(${name} PROPERTIES CUDA_RUNTIME_LIBRARY None)
    _ptkit_json_string_array(sass_json ${sass})
    _ptkit_json_string_array(ptx_json ${ptx})
    set(targets_json "{\"sass\": ${sass_json}, \"ptx\": ${ptx_json}}")
    set(toolkit_name "cuda")
    set(toolkit_version "${PTKIT_CUDA_FULL_VERSION}")
    set(audit "cuda")
    message(STATUS "ptkit: ${name}: CUDA SASS ${sass}; PTX ${ptx}; dropped: ${dropped}")
  endif()

  ptkit_install_kernel_library(${name}
    BACKEND ${arg_BACKEND} VARIANT ${arg_VARIANT} PACKAGE ${arg_PACKAGE}
    NAMESPACE ${arg_NAMESPACE} TORCH_TARGET_VERSION ${arg_TORCH_TARGET_VERSION}
    TOOLKIT_NAME ${toolkit_name} TOOLKIT_VERSION ${toolkit_version}
    TARGETS_JSON "${targets_json}" DROPPED ${dropped} AUDIT ${audit}
    OPS ${arg_OPS} DTYPES ${arg_DTYPES} INSTALL_DIR ${arg_INSTALL_DIR})
endfunction()
