# The Python interpreter of the build (scikit-build-core passes it), used to read
# recipes and to locate torch without importing it.
include_guard(GLOBAL)

if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 COMPONENTS Interpreter REQUIRED)
endif()

# The recipe reader: the copy inside an installed ptkit, unless the project says otherwise.
if(NOT PTKIT_RECIPES_MODULE)
  set(PTKIT_RECIPES_MODULE "${CMAKE_CURRENT_LIST_DIR}/../build/recipes.py")
endif()

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
