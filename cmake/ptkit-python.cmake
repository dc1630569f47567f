# The Python interpreter of the build (scikit-build-core passes it), used to read
# recipes and to locate torch without importing it.
include_guard(GLOBAL)

if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 COMPONENTS Interpreter REQUIRED)
endif()

# The build-time Python tools (recipes.py, fatbin.py; standard library only): the copies
# inside an installed ptkit, unless the project points elsewhere (ptkit's own build does).
if(NOT PTKIT_PYTHON_TOOLS_DIR)
  set(PTKIT_PYTHON_TOOLS_DIR "${CMAKE_CURRENT_LIST_DIR}/../build")
endif()
set(PTKIT_RECIPES_MODULE "${PTKIT_PYTHON_TOOLS_DIR}/recipes.py")

# ptkit_read_recipe(<variant> RECIPES_DIR <dir>): sets PTKIT_RECIPE_<FIELD> in the caller.
function(ptkit_read_recipe variant)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "RECIPES_DIR" "")
  if(NOT arg_RECIPES_DIR)
    message(FATAL_ERROR "ptkit_read_recipe(${variant}): RECIPES_DIR is required")
  endif()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" "${PTKIT_RECIPES_MODULE}" cmake "${arg_RECIPES_DIR}" "${variant}"
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ptkit_read_recipe(${variant}): ${err}")
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
