# The Python interpreter of the build (scikit-build-core passes it), used to read
# recipes, to ask ptkit's backend rules and to locate torch without importing it.
include_guard(GLOBAL)

if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 COMPONENTS Interpreter REQUIRED)
endif()

# ptkit's Python package, whose rules CMake asks instead of re-deriving them: the folder
# above this CMake package's ptkit/ (src/ in ptkit's source tree, site-packages when
# installed). Those modules are standard library only, so any build Python >= 3.10 runs
# them: ${PTKIT_PYTHON} -m ptkit.<tool> …
get_filename_component(PTKIT_PYTHON_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
if(NOT EXISTS "${PTKIT_PYTHON_PATH}/ptkit/backends/__init__.py")
  message(FATAL_ERROR "ptkit: this CMake package (${CMAKE_CURRENT_LIST_DIR}) is not inside "
                      "the ptkit Python package: no ${PTKIT_PYTHON_PATH}/ptkit/backends. Fix: "
                      "point ptkit_DIR at the folder `ptkit --cmake-dir` prints")
endif()
set(PTKIT_PYTHON "${CMAKE_COMMAND}" -E env "PYTHONPATH=${PTKIT_PYTHON_PATH}" "${Python_EXECUTABLE}")

# _ptkit_python_tool(<out_var> <error_prefix> <args>…): runs ${PTKIT_PYTHON} <args>; its
# stdout in <out_var>, a failure stops configure with its stderr.
function(_ptkit_python_tool out_var error_prefix)
  execute_process(COMMAND ${PTKIT_PYTHON} ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "${error_prefix}: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# _ptkit_read_fields(<prefix> <text>): each "KEY=value" line of <text> as <prefix><KEY> in
# the caller's caller (values are CMake lists).
macro(_ptkit_read_fields _ptkit_prefix _ptkit_text)
  string(REPLACE "\n" ";" _ptkit_lines "${_ptkit_text}")
  foreach(_ptkit_line IN LISTS _ptkit_lines)
    if(_ptkit_line MATCHES "^([A-Z_]+)=(.*)$")
      set(${_ptkit_prefix}${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    endif()
  endforeach()
endmacro()

# ptkit_read_recipe(<variant> [RECIPES_DIR <dir>])
# Sets PTKIT_RECIPE_<FIELD> in the caller (NAME, BACKEND, LOCAL_VERSION, ISA,
# CUDA_TARGETS, CUDA_OPTIONAL_TARGETS, HIP_TARGETS, HIP_OPTIONAL_TARGETS, XPU_TARGETS,
# TOOLKIT_VERSION). RECIPES_DIR defaults to the project's recipes/.
function(ptkit_read_recipe variant)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "RECIPES_DIR" "")
  set(fn "ptkit_read_recipe(${variant})")
  _ptkit_check_arguments("${fn}")
  if(NOT arg_RECIPES_DIR)
    set(arg_RECIPES_DIR "${PROJECT_SOURCE_DIR}/recipes")
  endif()
  if(NOT IS_DIRECTORY "${arg_RECIPES_DIR}")
    message(FATAL_ERROR "${fn}: no recipes folder '${arg_RECIPES_DIR}'. Fix: pass RECIPES_DIR "
                        "<folder holding <variant>.toml>")
  endif()
  _ptkit_python_tool(out "${fn}" -m ptkit.recipes cmake "${arg_RECIPES_DIR}" "${variant}")
  # One "FIELD=value;value" per line.
  string(REPLACE "\n" ";" lines "${out}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Z_]+)=(.*)$")
      string(REPLACE "," ";" value "${CMAKE_MATCH_2}")
      set(PTKIT_RECIPE_${CMAKE_MATCH_1} "${value}" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()
