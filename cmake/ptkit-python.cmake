# The Python interpreter of the build (scikit-build-core passes it), used to read
# recipes and to locate torch without importing it; and where ptkit's build-time Python
# tools live.
include_guard(GLOBAL)

if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 COMPONENTS Interpreter REQUIRED)
endif()

# The build-time Python tools (recipes.py, fatbin.py, offload.py; standard library only),
# found from this file's own folder, so that one layout-independent rule serves both:
#   installed ptkit:  <site-packages>/ptkit/cmake/  ->  <site-packages>/ptkit/build/
#   ptkit's source:   <repo>/cmake/                 ->  <repo>/src/ptkit/build/
# PTKIT_PYTHON_TOOLS_DIR overrides it (a folder holding recipes.py).
if(NOT PTKIT_PYTHON_TOOLS_DIR)
  foreach(_ptkit_candidate "${CMAKE_CURRENT_LIST_DIR}/../build" "${CMAKE_CURRENT_LIST_DIR}/../src/ptkit/build")
    if(EXISTS "${_ptkit_candidate}/recipes.py")
      get_filename_component(PTKIT_PYTHON_TOOLS_DIR "${_ptkit_candidate}" ABSOLUTE)
      break()
    endif()
  endforeach()
endif()
if(NOT EXISTS "${PTKIT_PYTHON_TOOLS_DIR}/recipes.py")
  if(PTKIT_PYTHON_TOOLS_DIR)
    set(_ptkit_where "PTKIT_PYTHON_TOOLS_DIR=${PTKIT_PYTHON_TOOLS_DIR} holds no recipes.py")
  else()
    string(CONCAT _ptkit_where "no recipes.py in ../build (an installed ptkit) or "
                  "../src/ptkit/build (ptkit's source tree) next to ${CMAKE_CURRENT_LIST_DIR}")
  endif()
  message(FATAL_ERROR "ptkit: ptkit's build-time tools are missing: ${_ptkit_where}. Fix: point "
                      "ptkit_DIR at the folder `ptkit --cmake-dir` prints (an installed ptkit), or "
                      "set PTKIT_PYTHON_TOOLS_DIR to the folder holding recipes.py")
endif()
set(PTKIT_RECIPES_MODULE "${PTKIT_PYTHON_TOOLS_DIR}/recipes.py")

# ptkit's own variant recipes: installed as ptkit/_recipes/, in the source tree recipes/.
set(PTKIT_RECIPES_DIR "")
foreach(_ptkit_candidate "${CMAKE_CURRENT_LIST_DIR}/../_recipes" "${CMAKE_CURRENT_LIST_DIR}/../recipes")
  if(EXISTS "${_ptkit_candidate}/cpu.toml")
    get_filename_component(PTKIT_RECIPES_DIR "${_ptkit_candidate}" ABSOLUTE)
    break()
  endif()
endforeach()

# ptkit_read_recipe(<variant> [RECIPES_DIR <dir>])
# Sets PTKIT_RECIPE_<FIELD> in the caller (NAME, BACKEND, LOCAL_VERSION, ISA,
# CUDA_TARGETS, CUDA_OPTIONAL_TARGETS, HIP_TARGETS, HIP_OPTIONAL_TARGETS, XPU_TARGETS,
# TOOLKIT_VERSION). RECIPES_DIR defaults to ptkit's own recipes (PTKIT_RECIPES_DIR).
function(ptkit_read_recipe variant)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "RECIPES_DIR" "")
  set(fn "ptkit_read_recipe(${variant})")
  _ptkit_check_arguments("${fn}")
  if(NOT arg_RECIPES_DIR)
    set(arg_RECIPES_DIR "${PTKIT_RECIPES_DIR}")
  endif()
  if(NOT IS_DIRECTORY "${arg_RECIPES_DIR}")
    message(FATAL_ERROR "${fn}: no recipes folder '${arg_RECIPES_DIR}'. Fix: pass RECIPES_DIR "
                        "<folder holding <variant>.toml>")
  endif()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" "${PTKIT_RECIPES_MODULE}" cmake "${arg_RECIPES_DIR}" "${variant}"
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${fn}: ${err}")
  endif()
  # One "FIELD=value;value" per line.
  string(REPLACE "\n" ";" lines "${out}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Z_]+)=(.*)$")
      string(REPLACE "," ";" value "${CMAKE_MATCH_2}")
      set(PTKIT_RECIPE_${CMAKE_MATCH_1} "${value}" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()
