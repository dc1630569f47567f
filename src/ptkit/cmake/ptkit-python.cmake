# The Python interpreter of the build (scikit-build-core passes it), used to read
# recipes, to ask ptkit's backend and platform rules and to locate torch without
# importing it. CMake re-derives none of those rules: it asks the modules that hold them.
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

# _ptkit_python_fields(<prefix> <error_var> <args>…)
# Runs ${PTKIT_PYTHON} <args> (a list argument: its ";" escaped as "\;") and sets each
# "KEY=value" line of its output as <prefix><KEY> in the caller (values are CMake lists),
# and <prefix>keys to the list of those KEYs.
# A failure sets <error_var> to what the tool printed on stderr (its "ptkit: " prefix
# dropped: the caller names itself), else to "".
function(_ptkit_python_fields prefix error_var)
  execute_process(COMMAND ${PTKIT_PYTHON} ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    string(REGEX REPLACE "^ptkit: " "" err "${err}")
    if(err STREQUAL "")
      set(err "${PTKIT_PYTHON} ${ARGN} failed (${rc}) without a message")
    endif()
    set(${error_var} "${err}" PARENT_SCOPE)
    return()
  endif()
  set(${error_var} "" PARENT_SCOPE)
  string(REPLACE ";" "\\;" out "${out}")
  string(REPLACE "\n" ";" lines "${out}")
  set(keys "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Z0-9_]+)=(.*)$")
      set(${prefix}${CMAKE_MATCH_1} "${CMAKE_MATCH_2}" PARENT_SCOPE)
      list(APPEND keys "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${prefix}keys "${keys}" PARENT_SCOPE)
endfunction()

# _ptkit_python_tool(<prefix> <error_prefix> <args>…): _ptkit_python_fields, where a
# failure stops configure: "<error_prefix>: <what the tool said>".
macro(_ptkit_python_tool _ptkit_prefix _ptkit_error_prefix)
  _ptkit_python_fields("${_ptkit_prefix}" _ptkit_tool_error ${ARGN})
  if(_ptkit_tool_error)
    message(FATAL_ERROR "${_ptkit_error_prefix}: ${_ptkit_tool_error}")
  endif()
endmacro()

# The backends ptkit knows (ptkit.backends.BACKENDS), for the argument checks and the
# build report.
_ptkit_python_tool(_PTKIT_BACKENDS_ "ptkit" -m ptkit.backends list)
set(PTKIT_BACKENDS ${_PTKIT_BACKENDS_NAMES})
# The backends whose recipe toolkits `ptkit toolchain install` puts into ptkit's cache.
set(PTKIT_CACHED_TOOLKIT_BACKENDS ${_PTKIT_BACKENDS_CACHED})
list(JOIN PTKIT_BACKENDS ", " PTKIT_BACKENDS_TEXT)

# What a kernel library is on the target system (ptkit.platforms: PTKIT_LIBRARY_TYPE,
# _PREFIX, _SUFFIX), and the compiler as ptkit.platforms names its flags' dialect: a
# cross toolchain file of ptkit.cross sets PTKIT_COMPILER_ID to Zig (CMake calls zig's
# clang Clang, whose -march zig refuses); else CMake's compiler id.
_ptkit_python_tool(PTKIT_LIBRARY_ "ptkit" -m ptkit.platforms library "${CMAKE_SYSTEM_NAME}")
if(NOT PTKIT_COMPILER_ID)
  set(PTKIT_COMPILER_ID "${CMAKE_CXX_COMPILER_ID}")
endif()

# ptkit_read_recipe(<variant> [RECIPES_DIR <dir>])
# Sets PTKIT_RECIPE_<FIELD> in the caller for every field of <dir>/<variant>.toml
# (python -m ptkit.recipes cmake, generated from ptkit.recipes.model): the [variant]
# keys as NAME, BACKEND, LOCAL_VERSION …; every table's keys as <TABLE>_<KEY>
# (TARGETS_ISA, TARGETS_CUDA, TOOLKIT_VERSION, TOOLKIT_PACKAGES, RELEASE_PLATFORMS …);
# TARGETS and OPTIONAL_TARGETS, the recipe backend's own target lists; TOOLKIT_INSTALL,
# the pip command of its toolkit (for messages); and PTKIT_RECIPE_DIR, the folder it was
# read from. Lists are CMake lists. A bad recipe stops configure with every problem.
# RECIPES_DIR defaults to the project's recipes/; editing the recipe re-runs configure.
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
  _ptkit_python_fields(field_ error -m ptkit.recipes cmake "${arg_RECIPES_DIR}" "${variant}")
  if(error)
    message(FATAL_ERROR "${fn}: ${error}")
  endif()
  foreach(key IN LISTS field_keys)
    set(PTKIT_RECIPE_${key} "${field_${key}}" PARENT_SCOPE)
  endforeach()
  get_filename_component(recipes_dir "${arg_RECIPES_DIR}" ABSOLUTE)
  set(PTKIT_RECIPE_DIR "${recipes_dir}" PARENT_SCOPE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${arg_RECIPES_DIR}/${variant}.toml")
endfunction()

# _ptkit_toolkit_install_hint(<backend> <out_var>): how to install the [toolkit] packages
# of the recipe ptkit_read_recipe read, when it is a recipe of <backend> that has them
# (the fix every toolkit message gives first), else "". A backend whose toolkits ptkit's
# toolchain cache holds (PTKIT_CACHED_TOOLKIT_BACKENDS: CUDA) gets `ptkit toolchain
# install`, never a pip install into the build Python, whose torch pins its own CUDA
# runtime; the others (TheRock's ROCm SDK) are found beside the build Python.
function(_ptkit_toolkit_install_hint backend out_var)
  set(hint "")
  if(PTKIT_RECIPE_BACKEND STREQUAL backend AND PTKIT_RECIPE_TOOLKIT_INSTALL)
    if(backend IN_LIST PTKIT_CACHED_TOOLKIT_BACKENDS)
      get_filename_component(recipes_name "${PTKIT_RECIPE_DIR}" NAME)
      get_filename_component(project_dir "${PTKIT_RECIPE_DIR}" DIRECTORY)
      if(recipes_name STREQUAL "recipes")
        set(which "${PTKIT_RECIPE_NAME} --source ${project_dir}")
      else()
        set(which "${PTKIT_RECIPE_DIR}/${PTKIT_RECIPE_NAME}.toml")
      endif()
      string(CONCAT hint "install recipe ${PTKIT_RECIPE_NAME}'s toolkit into ptkit's toolchain "
                         "cache: ${Python_EXECUTABLE} -m ptkit toolchain install ${which} "
                         "(ptkit build does this by itself)")
    else()
      string(CONCAT hint "install recipe ${PTKIT_RECIPE_NAME}'s [toolkit] packages into the build "
                         "Python (${Python_EXECUTABLE}): ${PTKIT_RECIPE_TOOLKIT_INSTALL}")
    endif()
    string(REPLACE ";" "\\;" hint "${hint}")
  endif()
  set(${out_var} "${hint}" PARENT_SCOPE)
endfunction()

# _ptkit_toolkit_override(<var> <out_var> <cached_var>): the toolkit a variable names for
# this configure: the environment variable <var> when it is set (an override given on a
# later run always replaces what an earlier configure cached), else the cache variable
# (-D<var>=…; <cached_var> TRUE), else "". The environment's value is never written to
# the cache, so unsetting it takes effect.
function(_ptkit_toolkit_override var out_var cached_var)
  set(value "$ENV{${var}}")
  set(cached FALSE)
  if(NOT value STREQUAL "")
    if(NOT "${${var}}" STREQUAL "" AND NOT "${${var}}" STREQUAL value)
      message(STATUS "ptkit: ${var} from the environment (${value}) replaces the cached "
                     "-D${var}=${${var}}")
    endif()
  elseif(NOT "${${var}}" STREQUAL "")
    set(value "${${var}}")
    set(cached TRUE)
  endif()
  set(${out_var} "${value}" PARENT_SCOPE)
  set(${cached_var} ${cached} PARENT_SCOPE)
endfunction()

# _ptkit_locate_toolkit(<backend> <prefix>): where the backend's compiler is, by
# ptkit.backends' discovery order (python -m ptkit.backends toolkit <backend>; the cache
# variables that name a toolkit are passed on as environment). Sets <prefix>_COMPILER,
# <prefix>_ROOT and <prefix>_SOURCE in the caller, or <prefix>_REASON: why none was
# found, with the fix (the recipe's [toolkit] packages first, when a recipe was read).
function(_ptkit_locate_toolkit backend prefix)
  set(env "")
  set(cached_args "")
  foreach(var PTKIT_CUDA_ROOT PTKIT_HIP_ROOT PTKIT_ICPX)
    _ptkit_toolkit_override(${var} value cached)
    if(NOT value STREQUAL "")
      list(APPEND env "${var}=${value}")
    endif()
    if(cached)
      list(APPEND cached_args "--cached=${var}" "--build-dir=${CMAKE_BINARY_DIR}")
    endif()
  endforeach()
  if("$ENV{PTKIT_CUDA_USE_SYSTEM}" STREQUAL "" AND PTKIT_CUDA_USE_SYSTEM)
    list(APPEND env "PTKIT_CUDA_USE_SYSTEM=1")
  endif()
  if(env)
    set(PTKIT_PYTHON "${CMAKE_COMMAND}" -E env ${env} ${PTKIT_PYTHON})
  endif()
  _ptkit_toolkit_install_hint(${backend} hint)
  _ptkit_python_fields(found_ error -m ptkit.backends toolkit ${backend} "--install-hint=${hint}"
                       ${cached_args})
  foreach(key COMPILER ROOT SOURCE REASON)
    set(${prefix}_${key} "${found_${key}}" PARENT_SCOPE)
  endforeach()
  if(error)
    set(${prefix}_REASON "${error}" PARENT_SCOPE)
  endif()
endfunction()
