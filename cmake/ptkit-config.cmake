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
#   + ptkit_install_kernel_library() (install rules and manifest).
include_guard(GLOBAL)

set(PTKIT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
# The oldest torch whose stable ABI the libraries target: they load into any torch >= it.
set(PTKIT_DEFAULT_TORCH_TARGET_VERSION "2.10" CACHE STRING "LibTorch stable ABI version to target")

include("${CMAKE_CURRENT_LIST_DIR}/ptkit-python.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-torch.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-cpu.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ptkit-manifest.cmake")

# ptkit_add_kernel_library(<name> BACKEND cpu NAMESPACE <ns> SOURCES <src>…
#     [ISA_SOURCES <src>… ISA <level>…] [INCLUDE_DIRS <dir>…] OPS <op>… DTYPES <dtype>…
#     [VARIANT <variant>] [PACKAGE <dist>] [TORCH_TARGET_VERSION <x.y>] INSTALL_DIR <dir>)
function(ptkit_add_kernel_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
    "BACKEND;NAMESPACE;VARIANT;PACKAGE;TORCH_TARGET_VERSION;INSTALL_DIR"
    "SOURCES;ISA_SOURCES;ISA;INCLUDE_DIRS;OPS;DTYPES")
  set(fn "ptkit_add_kernel_library(${name})")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${fn}: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required BACKEND NAMESPACE SOURCES OPS DTYPES INSTALL_DIR)
    if(NOT arg_${required})
      message(FATAL_ERROR "${fn}: ${required} is required")
    endif()
  endforeach()
  if(NOT arg_BACKEND STREQUAL "cpu")
    message(FATAL_ERROR "${fn}: BACKEND ${arg_BACKEND} is not supported yet; supported: cpu")
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
  set(isa_built "")
  if(arg_ISA_SOURCES)
    if(NOT arg_ISA)
      set(arg_ISA default)
    endif()
    ptkit_target_cpu_isa(${name} SOURCES ${arg_ISA_SOURCES} ISA ${arg_ISA}
                         INCLUDE_DIRS ${arg_INCLUDE_DIRS} BUILT_VAR isa_built)
  endif()
  ptkit_install_kernel_library(${name}
    BACKEND ${arg_BACKEND} VARIANT ${arg_VARIANT} PACKAGE ${arg_PACKAGE}
    NAMESPACE ${arg_NAMESPACE} TORCH_TARGET_VERSION ${arg_TORCH_TARGET_VERSION}
    OPS ${arg_OPS} DTYPES ${arg_DTYPES} ISA ${isa_built} INSTALL_DIR ${arg_INSTALL_DIR})
endfunction()
